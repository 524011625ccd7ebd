<?php

declare(strict_types=1);

namespace Ferry\Laravel;

use Illuminate\Container\Container;
use Illuminate\Contracts\Auth\Access\Gate;
use Illuminate\Contracts\Http\Kernel as HttpKernel;
use Illuminate\Contracts\Routing\ResponseFactory;
use Illuminate\Foundation\Application;
use Illuminate\Pagination\PaginationState;
use Illuminate\Support\Facades\Facade;

/**
 * One request's copy of the booted application, the way Laravel Octane makes it: a clone of the base
 * application (its bindings, and the singletons resolved at boot, shared) made the current container and the
 * facades' application, with the request-scoped state of the shared singletons reset so that nothing one
 * request (one user) left in them reaches the next: auth guards, the session store, queued cookies, the
 * config and URL generator (cloned), the view factory's shared data, the translator's locale, the paginator's
 * resolvers, the redirector and response factory (which hold a session store and a URL generator), the
 * controller instance cached on the matched route. Singletons first resolved during the request live in the
 * sandbox only and go with it.
 */
final class Sandbox
{
    /** Bindings resolved per request (they hold a request, a session store or a URL generator). */
    private const REQUEST_SCOPED = ['redirect', ResponseFactory::class, 'auth.driver', 'session.store', 'request'];

    /** Services resolved at boot (as Octane warms them), so that requests do not pay for them. */
    public const WARM = ['auth', 'cache', 'cache.store', 'config', 'cookie', 'db', 'db.factory', 'encrypter', 'files',
        'hash', 'log', 'router', 'routes', 'session', 'translator', 'url', 'view'];

    /** @var array<string, mixed> the view factory's shared data after boot */
    private array $viewShared = [];

    /** @param list<string> $flush bindings the app names (config ferry.flush) to resolve afresh per request */
    public function __construct(private readonly Application $app, private readonly array $flush = [])
    {
        if ($app->resolved('view')) {
            $this->viewShared = $app['view']->getShared();
        }
    }

    /** Warms the base application's services (those bound), once, after the kernel's bootstrap. */
    public static function warm(Application $app): void
    {
        foreach (self::WARM as $name) {
            if ($app->bound($name)) {
                $app->make($name);
            }
        }
    }

    /** The application instance that serves the next request. */
    public function create(): Application
    {
        $sandbox = clone $this->app;
        self::makeCurrent($sandbox);
        foreach (\array_merge(self::REQUEST_SCOPED, $this->flush) as $name) {
            $sandbox->forgetInstance($name);
        }
        $sandbox->instance('config', clone $this->app['config']);
        if ($sandbox->resolved('url')) {
            $sandbox->instance('url', clone $this->app['url']);
        }
        $this->giveApplication($sandbox);
        $this->flushRequestState($sandbox);
        return $sandbox;
    }

    /** After the response: back to the base application, the request's state released. */
    public function end(Application $sandbox): void
    {
        if ($sandbox->resolved('router')) {
            $sandbox['router']->current()?->flushController(); // a controller per request, as under php-fpm
        }
        $this->flushRequestState($sandbox);
        self::makeCurrent($this->app);
    }

    public static function makeCurrent(Application $app): void
    {
        $app->instance('app', $app);
        $app->instance(Container::class, $app);
        Container::setInstance($app);
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
    }

    /** The shared singletons that keep a container resolve through the sandbox. */
    private function giveApplication(Application $sandbox): void
    {
        $sandbox->make(HttpKernel::class)->setApplication($sandbox);
        $setters = ['router' => 'setContainer', 'db' => 'setApplication', 'filesystem' => 'setApplication',
            'mail.manager' => 'setApplication', 'queue' => 'setApplication', 'validator' => 'setContainer',
            'Illuminate\Contracts\Pipeline\Hub' => 'setContainer', 'view' => 'setContainer',
            'session' => 'setContainer', 'auth' => 'setApplication', Gate::class => 'setContainer',
            'Illuminate\Contracts\Broadcasting\Factory' => 'setApplication',
            'Illuminate\Notifications\ChannelManager' => 'setContainer'];
        foreach ($setters as $name => $setter) {
            if ($sandbox->resolved($name)) {
                $service = $sandbox->make($name);
                if (\method_exists($service, $setter)) {
                    $service->{$setter}($sandbox);
                }
            }
        }
        if ($sandbox->resolved('view')) {
            $view = $sandbox['view'];
            $shared = $this->viewShared;
            (function () use ($shared): void {
                $this->shared = $shared; // what a request shared (View::share) is dropped
            })->call($view);
            $view->share('app', $sandbox);
            $view->flushState();
        }
        if (\class_exists(PaginationState::class)) {
            PaginationState::resolveUsing($sandbox);
        }
    }

    /** Request-scoped state kept by shared singletons (before a request and after it). */
    private function flushRequestState(Application $app): void
    {
        if ($app->resolved('auth')) {
            $app['auth']->forgetGuards();
        }
        if ($app->resolved('session')) {
            $app['session']->forgetDrivers(); // a new store per request, started from the request's cookie
        }
        if ($app->resolved('cookie')) {
            $app['cookie']->flushQueuedCookies();
        }
        if ($app->resolved('translator')) {
            $config = $this->app['config']; // the boot configuration (a request's App::setLocale() changed its copy)
            $locale = (string) $config->get('app.locale', 'en');
            $translator = $app['translator'];
            if ($translator->getLocale() !== $locale) {
                $translator->setLocale($locale);
            }
            $translator->setFallback((string) $config->get('app.fallback_locale', 'en'));
            // Carbon's locale follows the app's (Carbon's provider); set again only when a request changed it
            // (the provider's updateLocale() costs more than a small request's whole handling)
            if (\class_exists(\Carbon\Laravel\ServiceProvider::class)
                && (\Carbon\Carbon::getLocale() !== $locale || \Carbon\CarbonImmutable::getLocale() !== $locale)) {
                (new \Carbon\Laravel\ServiceProvider($app))->updateLocale();
            }
        }
        if ($app->resolved('cache') && \is_array($app['config']->get('cache.stores.array'))) {
            $app['cache']->store('array')->flush();
        }
    }
}
