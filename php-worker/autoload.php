<?php

declare(strict_types=1);

// PSR-4 autoloader for Ferry\Worker (no Composer needed). The PSR-7 bridge also needs the
// psr/http-message and psr/http-factory interfaces and a PSR-17 implementation loaded by the app.
spl_autoload_register(static function (string $class): void {
    $prefix = 'Ferry\\Worker\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
