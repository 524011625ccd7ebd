<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Laravel\Sandbox;
use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Contracts\Http\Kernel as HttpKernel;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;
use PHPUnit\Framework\TestCase;

/**
 * Ferry\Laravel\Sandbox on a small application built here (no bootstrap/app.php, no exception handler
 * installed): each request's sandbox is the current container, and what a request left in the shared
 * singletons (locale, queued cookies, view data, session store, auth guards, config) is gone in the next.
 */
final class LaravelSandboxTest extends TestCase
{
    private string $dir = '';
    private Application $app;

    protected function setUp(): void
    {
        if (!\class_exists(Application::class)) {
            self::markTestSkipped('Laravel is not installed (scripts/setup.sh installs php-laravel-framework)');
        }
        $this->dir = \sys_get_temp_dir() . '/ferry-laravel-' . \bin2hex(\random_bytes(4));
        \mkdir($this->dir . '/views', 0777, true);
        $app = new Application($this->dir);
        $app->instance('config', new Repository([
            'app' => ['locale' => 'en', 'fallback_locale' => 'en', 'name' => 'base'],
            'session' => ['driver' => 'array', 'cookie' => 's', 'lifetime' => 10, 'path' => '/', 'domain' => null,
                'secure' => false, 'same_site' => 'lax'],
            'auth' => ['defaults' => ['guard' => 'web'], 'guards' => ['web' => ['driver' => 'session', 'provider' => 'users']],
                'providers' => ['users' => ['driver' => 'eloquent', 'model' => \Illuminate\Foundation\Auth\User::class]]],
            'view' => ['paths' => [$this->dir . '/views'], 'compiled' => $this->dir],
        ]));
        foreach ([\Illuminate\Filesystem\FilesystemServiceProvider::class, \Illuminate\Cookie\CookieServiceProvider::class,
            \Illuminate\Session\SessionServiceProvider::class, \Illuminate\Hashing\HashServiceProvider::class,
            \Illuminate\Auth\AuthServiceProvider::class, \Illuminate\Translation\TranslationServiceProvider::class,
            \Illuminate\View\ViewServiceProvider::class] as $provider) {
            $app->register($provider);
        }
        $app->singleton(HttpKernel::class, \Illuminate\Foundation\Http\Kernel::class);
        $app->singleton('kept', \stdClass::class);
        $app->singleton('flushed', \stdClass::class);
        $app->boot();
        $app->instance('request', \Illuminate\Http\Request::create('http://localhost/'));
        Sandbox::warm($app);
        $app->make('kept');
        $app->make('flushed');
        $app->make('redirect');
        $this->app = $app;
    }

    protected function tearDown(): void
    {
        Container::setInstance(null);
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication(null);
        if ($this->dir !== '') {
            \exec('rm -rf ' . \escapeshellarg($this->dir));
        }
    }

    private function sandbox(): Sandbox
    {
        return new Sandbox($this->app, ['flushed']);
    }

    public function testASandboxIsTheCurrentApplicationUntilTheRequestEnds(): void
    {
        $sandboxes = $this->sandbox();
        $sandbox = $sandboxes->create();
        self::assertNotSame($this->app, $sandbox);
        self::assertSame($sandbox, Container::getInstance());
        self::assertSame($sandbox, Facade::getFacadeApplication());
        self::assertSame($sandbox, $sandbox->make('app'));
        self::assertSame($sandbox, $sandbox->make(Container::class));
        self::assertSame($sandbox, $sandbox->make(HttpKernel::class)->getApplication());
        self::assertSame($this->app->make('kept'), $sandbox->make('kept')); // a singleton of the boot, shared
        self::assertNotSame($this->app->make('flushed'), $sandbox->make('flushed')); // named in ferry.flush
        self::assertNotSame($this->app->make('redirect'), $sandbox->make('redirect')); // holds a session store
        $sandbox->instance('set.by.a.request', 1);
        $sandbox['config']->set('app.name', 'changed');
        $sandboxes->end($sandbox);
        self::assertSame($this->app, Container::getInstance());
        self::assertSame($this->app, Facade::getFacadeApplication());
        $next = $sandboxes->create();
        self::assertFalse($next->bound('set.by.a.request'));
        self::assertSame('base', $next['config']->get('app.name'));
        self::assertSame('base', $this->app['config']->get('app.name'));
    }

    public function testRequestStateInSharedSingletonsIsFlushed(): void
    {
        $sandboxes = $this->sandbox();
        $one = $sandboxes->create();
        self::assertFalse($one->bound('request')); // the kernel gives each request its own
        $one->instance('request', \Illuminate\Http\Request::create('http://localhost/one'));
        $one->setLocale('de');
        $one['cookie']->queue('flavour', 'mint');
        $one['view']->share('visitor', 'one');
        $store = $one['session']->driver();
        $store->put('name', 'one');
        $guard = $one['auth']->guard();
        self::assertSame('de', $one['translator']->getLocale());
        $sandboxes->end($one);
        self::assertSame('en', $this->app['translator']->getLocale());

        $two = $sandboxes->create();
        $two->instance('request', \Illuminate\Http\Request::create('http://localhost/two'));
        self::assertSame('en', $two->getLocale());
        self::assertSame('en', $two['translator']->getLocale());
        self::assertSame([], $two['cookie']->getQueuedCookies());
        self::assertNull($two['view']->shared('visitor'));
        self::assertSame($two, $two['view']->shared('app'));
        self::assertNotSame($store, $two['session']->driver());
        self::assertNull($two['session']->driver()->get('name'));
        self::assertNotSame($guard, $two['auth']->guard());
        self::assertSame($two, (fn () => $this->app)->call($two['auth']));
        self::assertNotSame($one['url'], $two['url']);
    }
}
