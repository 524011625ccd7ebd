<?php

declare(strict_types=1);

namespace Ferry\Laravel;

use Ferry\Runtime\HttpFoundation;
use Ferry\Worker\Worker;
use Illuminate\Contracts\Http\Kernel as HttpKernel;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;
use Illuminate\Http\UploadedFile;

/**
 * A Laravel application on Ferry: bootstrap/app.php booted once per worker (the HTTP kernel's bootstrappers,
 * the usual services warmed), then every request served by a Sandbox of it: Ferry's request as Laravel's
 * (Symfony's underneath: Ferry\Runtime\HttpFoundation), $kernel->handle(), the response sent (streamed and
 * file responses included; what the app printed goes first), $kernel->terminate(), the sandbox dropped.
 */
final class Runner
{
    private readonly Sandbox $sandbox;
    private readonly HttpFoundation $bridge;
    private ?Databases $databases = null;

    public function __construct(private readonly Application $app)
    {
        $server = $_SERVER;
        unset($server['argv'], $server['argc'], $server['SCRIPT_FILENAME'], $server['SCRIPT_NAME'], $server['PHP_SELF'], $server['PATH_TRANSLATED']);
        $front = $app->publicPath() . '/index.php';
        $this->bridge = new HttpFoundation($server, '/index.php', \is_file($front) ? (\realpath($front) ?: $front) : '', UploadedFile::class, Request::class);
        // Some providers and the URL generator want a request while they boot; the real one comes per request.
        $app->instance('request', Request::create('http://localhost/'));
        $app->make(HttpKernel::class)->bootstrap();
        Sandbox::warm($app);
        if ($app->resolved('db')) {
            // Connections the boot opened (a provider's query) are reopened by the first request that needs
            // them: a worker forked from this process after its boot (Ferry's fork mode) shares none.
            foreach (\array_keys($app['db']->getConnections()) as $name) {
                $app['db']->purge((string) $name);
            }
        }
        $this->sandbox = new Sandbox($app, (array) $app['config']->get('ferry.flush', []));
    }

    /** Boots $basePath/bootstrap/app.php as a web application (not the console Laravel sees in the PHP CLI). */
    public static function boot(string $basePath): self
    {
        foreach (['APP_RUNNING_IN_CONSOLE' => 'false', 'APP_BASE_PATH' => $basePath] as $name => $value) {
            $_ENV[$name] = $_SERVER[$name] = $value;
            \putenv("{$name}={$value}");
        }
        $app = require $basePath . '/bootstrap/app.php';
        if (!$app instanceof Application) {
            throw new \UnexpectedValueException("{$basePath}/bootstrap/app.php did not return an Illuminate\\Foundation\\Application");
        }
        return new self($app);
    }

    public function run(?Worker $worker = null): int
    {
        $worker ??= Worker::create();
        while (($request = $worker->waitRequest()) !== null) {
            $this->serve($worker, $request);
        }
        return 0;
    }

    public function serve(Worker $worker, \Ferry\Worker\Request $ferryRequest): void
    {
        $this->databases()?->prepare();
        $request = $this->bridge->toSymfony($ferryRequest); // an Illuminate\Http\Request
        \assert($request instanceof Request);
        if ($request->isJson()) { // as Request::createFromBase() does: a JSON body is the request's input
            $request->request = $request->json();
        }
        $sandbox = $this->sandbox->create();
        $this->app->instance('request', $request); // what the base app's resolvers (captured at boot) see
        $kernel = $sandbox->make(HttpKernel::class);
        $level = \ob_get_level();
        \ob_start();
        $printed = '';
        $response = null;
        try {
            $response = $kernel->handle($request); // renders the app's exceptions with its handler
        } catch (\Throwable $e) {
            Worker::log(\sprintf("ferry laravel: %s: %s in %s:%d\n%s", $e::class, $e->getMessage(), $e->getFile(), $e->getLine(), $e->getTraceAsString()));
        } finally {
            while (\ob_get_level() > $level) {
                $printed = \ob_get_clean() . $printed;
            }
        }
        try {
            if ($response === null) {
                $worker->error('the application failed: see the worker\'s log');
                return;
            }
            $this->bridge->send($worker, $response, $printed, $request->headers->get('X-Sendfile-Type') === 'X-Sendfile');
            $kernel->terminate($request, $response);
        } finally {
            $this->sandbox->end($sandbox);
            $this->databases()?->prepare();
            $this->databases()?->remember();
        }
    }

    public function application(): Application
    {
        return $this->app;
    }

    private function databases(): ?Databases
    {
        if ($this->databases === null && $this->app->resolved('db')) {
            $this->databases = new Databases($this->app['db']);
        }
        return $this->databases;
    }
}
