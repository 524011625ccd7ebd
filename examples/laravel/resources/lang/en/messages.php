<?php return ['hello' => 'Hello'];
