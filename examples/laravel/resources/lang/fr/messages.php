<?php return ['hello' => 'Bonjour'];
