<?php

declare(strict_types=1);

namespace Ferry\Runtime;

use Ferry\Worker\Worker;
use Symfony\Component\HttpKernel\EventListener\StreamedResponseListener;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\HttpKernel\KernelEvents;
use Symfony\Component\HttpKernel\KernelInterface;
use Symfony\Component\HttpKernel\TerminableInterface;
use Symfony\Component\Runtime\RunnerInterface;

/**
 * Serves requests with one booted HttpKernel until the server stops the worker: each request built from
 * Ferry's context, handled, its response sent, then terminate() (kernel.terminate listeners); the kernel
 * resets its services (kernel.reset, the session among them) when the next request begins.
 *
 * What the application prints while it handles a request (echo, print, var_dump) is sent before the
 * response body, as php-fpm sends it; header() has no effect in the CLI and is not sent.
 */
final class KernelRunner implements RunnerInterface
{
    public function __construct(
        private readonly HttpKernelInterface $kernel,
        private readonly HttpFoundation $bridge,
        private readonly ?Worker $worker = null,
    ) {
    }

    public function run(): int
    {
        $worker = $this->worker ?? Worker::create();
        $this->boot();
        while (($request = $worker->waitRequest()) !== null) {
            $sfRequest = $this->bridge->toSymfony($request);
            $level = \ob_get_level();
            \ob_start();
            $printed = '';
            $response = null;
            try {
                $response = $this->kernel->handle($sfRequest);
            } catch (\Throwable $e) {
                // handle() renders the application's errors itself; this is one it let through (catch: false
                // in a kernel of its own): a 500 and a log line, and the worker goes on.
                Worker::log(\sprintf("ferry runtime: %s: %s in %s:%d\n%s", $e::class, $e->getMessage(), $e->getFile(), $e->getLine(), $e->getTraceAsString()));
            } finally {
                while (\ob_get_level() > $level) {
                    $printed = \ob_get_clean() . $printed;
                }
            }
            if ($response === null) {
                $worker->error('the application failed: see the worker\'s log');
                continue;
            }
            $this->bridge->send($worker, $response, $printed, $sfRequest->headers->get('X-Sendfile-Type') === 'X-Sendfile');
            if ($this->kernel instanceof TerminableInterface) {
                $this->kernel->terminate($sfRequest, $response);
            }
            if ($response->getStatusCode() >= 500) {
                $this->resetServices();
            }
        }
        return 0;
    }

    /**
     * The kernel resets its services when the next request begins; after a failed request (5xx) they are
     * reset at once, so that what it left behind (a database transaction and its locks) is not held until
     * this worker's next request.
     */
    private function resetServices(): void
    {
        if (!$this->kernel instanceof KernelInterface) {
            return;
        }
        $container = $this->kernel->getContainer();
        if ($container->has('services_resetter')) {
            $container->get('services_resetter')->reset();
        }
    }

    /**
     * Boots the kernel before the first request (a broken app fails at the worker's start, not at a
     * client's request) and takes the sending of streamed responses over from FrameworkBundle's
     * StreamedResponseListener, which would run the callback inside handle() (symfony/runtime's runners
     * send the response after handle(); the listener is deprecated since Symfony 6.1 for that reason).
     */
    private function boot(): void
    {
        if (!$this->kernel instanceof KernelInterface) {
            return;
        }
        $this->kernel->boot();
        $container = $this->kernel->getContainer();
        if (!$container->has('event_dispatcher')) {
            return;
        }
        $dispatcher = $container->get('event_dispatcher');
        foreach ($dispatcher->getListeners(KernelEvents::RESPONSE) as $listener) {
            if (\is_array($listener) && $listener[0] instanceof StreamedResponseListener) {
                $dispatcher->removeListener(KernelEvents::RESPONSE, $listener);
            }
        }
    }
}
