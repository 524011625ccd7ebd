<?php

declare(strict_types=1);

namespace Ferry\Runtime;

use Ferry\Worker\Worker;
use Symfony\Component\HttpFoundation\Response as SymfonyResponse;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\Runtime\RunnerInterface;
use Symfony\Component\Runtime\SymfonyRuntime;

/**
 * A symfony/runtime runtime for Ferry: the app's standard front controller (public/index.php returning a
 * closure that makes the Kernel) runs as a long-lived worker with
 *
 *     server:
 *       command: "php public/index.php"
 *       env:
 *         APP_RUNTIME: Ferry\Runtime\Runtime
 *
 * and the same file still runs under php-fpm (without APP_RUNTIME). The kernel is booted once per worker
 * and serves every request of that worker (KernelRunner); a closure that returns a Response serves it to
 * every request, one that returns a PSR-15 request handler or a PSR-7 response is served through Psr7Worker
 * (Psr15Runner). Options are SymfonyRuntime's.
 */
class Runtime extends SymfonyRuntime
{
    public function getRunner(?object $application): RunnerInterface
    {
        if ($application instanceof HttpKernelInterface) {
            return new KernelRunner($application, $this->bridge());
        }
        if ($application instanceof SymfonyResponse) { // the same response to every request
            return new class ($application, $this->bridge()) implements RunnerInterface {
                public function __construct(private readonly SymfonyResponse $response, private readonly HttpFoundation $bridge)
                {
                }

                public function run(): int
                {
                    $worker = Worker::create();
                    while ($worker->waitRequest() !== null) {
                        $this->bridge->send($worker, $this->response);
                    }
                    return 0;
                }
            };
        }
        if ($application instanceof \Psr\Http\Message\ResponseInterface
            || (\interface_exists(\Psr\Http\Server\RequestHandlerInterface::class)
                && $application instanceof \Psr\Http\Server\RequestHandlerInterface)) {
            return new Psr15Runner($application);
        }
        return parent::getRunner($application);
    }

    private function bridge(): HttpFoundation
    {
        $file = (string) ($_SERVER['SCRIPT_FILENAME'] ?? '');
        $real = $file !== '' ? (\realpath($file) ?: $file) : '';
        $server = $_SERVER;
        unset($server['SCRIPT_FILENAME'], $server['SCRIPT_NAME'], $server['PHP_SELF'], $server['PATH_TRANSLATED']);
        return new HttpFoundation($server, $real !== '' ? '/' . \basename($real) : '', $real);
    }
}
