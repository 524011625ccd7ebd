<?php return ['hello' => 'Hallo'];
