<?php

namespace App;

use App\Controller\AppController;
use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Bundle\TwigBundle\TwigBundle;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpKernel\Kernel as BaseKernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

class Kernel extends BaseKernel
{
    use MicroKernelTrait;

    public function registerBundles(): iterable
    {
        return [new FrameworkBundle(), new TwigBundle()];
    }

    protected function configureContainer(ContainerConfigurator $container): void
    {
        $container->extension('framework', [
            'secret' => '%env(APP_SECRET)%',
            'http_method_override' => false,
            'session' => [
                // PHP's files handler in the app's own var/sessions (handler_id null would use php.ini's
                // session.save_path, the system's /var/lib/php/sessions, and ignore save_path)
                'handler_id' => 'session.handler.native_file',
                'save_path' => '%kernel.project_dir%/var/sessions/%kernel.environment%',
                'storage_factory_id' => 'session.storage.factory.native',
                'cookie_secure' => 'auto',
                'cookie_samesite' => 'lax',
            ],
            'csrf_protection' => true,
            'default_locale' => 'en',
            'translator' => ['default_path' => '%kernel.project_dir%/translations', 'fallbacks' => ['en']],
            'php_errors' => ['log' => true],
            'router' => ['utf8' => true],
        ]);
        $container->parameters()->set('env(APP_SECRET)', 'ferry-example-not-a-secret'); // set APP_SECRET in production
        $container->extension('twig', ['default_path' => '%kernel.project_dir%/templates']);
        $services = $container->services()->defaults()->autowire()->autoconfigure();
        $services->load('App\\', '../src/')->exclude('../src/Kernel.php');
        $services->set(AppController::class)->public()->tag('controller.service_arguments');
        $services->set(\App\Service\Notes::class)->arg('$file', '%kernel.project_dir%/var/notes.sqlite');
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $c = AppController::class;
        $routes->add('home', '/')->controller([$c, 'home'])->methods(['GET']);
        $routes->add('notes', '/notes')->controller([$c, 'addNote'])->methods(['POST']);
        $routes->add('notes_fail', '/notes/fail')->controller([$c, 'failNote'])->methods(['POST']);
        $routes->add('notes_list', '/api/notes')->controller([$c, 'notes'])->methods(['GET']);
        $routes->add('api', '/api/info')->controller([$c, 'info'])->methods(['GET']);
        $routes->add('session', '/session')->controller([$c, 'session'])->methods(['GET', 'POST']);
        $routes->add('upload', '/upload')->controller([$c, 'upload'])->methods(['POST']);
        $routes->add('stream', '/stream')->controller([$c, 'lines'])->methods(['GET']);
        $routes->add('echo', '/echo')->controller([$c, 'echo'])->methods(['GET']);
        $routes->add('state', '/state')->controller([$c, 'state'])->methods(['GET']);
        $routes->add('boom', '/boom')->controller([$c, 'boom'])->methods(['GET']);
        $routes->add('exit', '/exit')->controller([$c, 'exit'])->methods(['GET']);
        $routes->add('fatal', '/fatal')->controller([$c, 'fatal'])->methods(['GET']);
        $routes->add('download', '/download')->controller([$c, 'download'])->methods(['GET', 'HEAD']);
        $routes->add('leak', '/leak')->controller([$c, 'leak'])->methods(['GET']);
        $routes->add('cookie', '/cookie')->controller([$c, 'cookie'])->methods(['GET']);
        $routes->add('request', '/request')->controller([$c, 'request'])->methods(['GET', 'POST', 'PUT']);
    }
}
