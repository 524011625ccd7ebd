<?php

// What Composer's vendor/autoload.php would be for this app, from Debian's packages (no Composer, no download):
// Laravel's own autoloader under /usr/share/php (it requires those of its dependencies: Symfony components,
// Carbon, Monolog, Doctrine Inflector, Flysystem, Ramsey UUID...), and the app's classes (App\ in app/, as
// composer.json's "psr-4" says). Ferry's php-worker library when the app runs under Ferry
// (FERRY_PHP_WORKER, which ferry sets; without it, as under php-fpm, the copy in this repository).

require_once '/usr/share/php/Illuminate/autoload.php';

$ferry = (getenv('FERRY_PHP_WORKER') ?: dirname(__DIR__, 3).'/php-worker').'/autoload.php';
if (is_file($ferry)) {
    require_once $ferry;
}

spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'App\\')) {
        $file = dirname(__DIR__).'/app/'.str_replace('\\', '/', substr($class, 4)).'.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
