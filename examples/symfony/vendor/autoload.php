<?php

// What Composer's vendor/autoload.php would be for this app, from Debian's packages (no Composer, no download):
// each package's own autoloader under /usr/share/php, and the app's classes (App\ in src/, as composer.json's
// "psr-4" would say). Ferry's php-worker library when the app runs under Ferry (FERRY_PHP_WORKER,
// which ferry sets; without it, as under php-fpm, the copy in this repository).

require_once '/usr/share/php/Symfony/Component/Runtime/autoload.php';
require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
require_once '/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php';
require_once '/usr/share/php/Twig/autoload.php';
require_once '/usr/share/php/Symfony/Component/Security/Csrf/autoload.php';
require_once '/usr/share/php/Symfony/Component/Translation/autoload.php';

$ferry = (getenv('FERRY_PHP_WORKER') ?: dirname(__DIR__, 3).'/php-worker').'/autoload.php';
if (is_file($ferry)) {
    require_once $ferry;
}

spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'App\\')) {
        $file = dirname(__DIR__).'/src/'.str_replace('\\', '/', substr($class, 4)).'.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
