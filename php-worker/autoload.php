<?php

declare(strict_types=1);

// PSR-4 autoloader for Ferry\Worker and Ferry\Runtime (no Composer needed). The PSR-7 bridge also needs the
// psr/http-message and psr/http-factory interfaces and a PSR-17 implementation loaded by the app.
// Ferry\Runtime (the symfony/runtime runtime, src/Runtime/) needs symfony/runtime and symfony/http-kernel;
// Ferry\Laravel (src/Laravel/, bin/ferry-laravel) needs laravel/framework.
spl_autoload_register(static function (string $class): void {
    foreach (['Ferry\\Worker\\' => '/src/', 'Ferry\\Runtime\\' => '/src/Runtime/', 'Ferry\\Laravel\\' => '/src/Laravel/'] as $prefix => $dir) {
        if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
            continue;
        }
        $file = __DIR__ . $dir . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
        return;
    }
});
