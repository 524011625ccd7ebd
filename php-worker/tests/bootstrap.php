<?php

declare(strict_types=1);

require __DIR__ . '/../autoload.php';
require '/usr/share/php/Nyholm/Psr7/autoload.php';
// Ferry\Runtime's tests (SymfonyRuntimeTest) when Symfony is installed (scripts/setup.sh: php-symfony-*).
foreach (['Symfony/Component/Runtime/autoload.php', 'Symfony/Component/HttpKernel/autoload.php'] as $symfony) {
    if (is_file('/usr/share/php/' . $symfony)) {
        require_once '/usr/share/php/' . $symfony;
    }
}
// Ferry\Laravel's tests (LaravelSandboxTest) when Laravel is installed (scripts/setup.sh: php-laravel-framework).
if (is_file('/usr/share/php/Illuminate/autoload.php')) {
    require_once '/usr/share/php/Illuminate/autoload.php';
}

spl_autoload_register(static function (string $class): void {
    $prefix = 'Ferry\\Worker\\Tests\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
