<?php

// Symfony's standard front controller, unchanged: php-fpm runs it per request; Ferry runs it once per worker
// with APP_RUNTIME=Ferry\Runtime\Runtime (.rr.yaml), and the kernel it returns serves every request.

use App\Kernel;

require_once dirname(__DIR__).'/vendor/autoload_runtime.php';

return function (array $context) {
    return new Kernel($context['APP_ENV'], (bool) $context['APP_DEBUG']);
};
