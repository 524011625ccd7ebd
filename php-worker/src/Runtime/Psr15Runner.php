<?php

declare(strict_types=1);

namespace Ferry\Runtime;

use Ferry\Worker\Psr7Worker;
use Ferry\Worker\Worker;
use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Symfony\Component\Runtime\RunnerInterface;

/**
 * Serves a PSR-15 request handler (an object with handle(ServerRequestInterface): ResponseInterface, as
 * Psr\Http\Server\RequestHandlerInterface declares), or one PSR-7 response for every request, through
 * Psr7Worker with nyholm/psr7's PSR-17 factories (Debian's php-nyholm-psr7).
 */
final class Psr15Runner implements RunnerInterface
{
    public function __construct(private readonly object $app, private readonly ?Worker $worker = null)
    {
    }

    public function run(): int
    {
        if (!\class_exists(\Nyholm\Psr7\Factory\Psr17Factory::class)) {
            throw new \LogicException('Ferry\Runtime serves PSR-7 apps with nyholm/psr7\'s factories: install it '
                . '(Debian: php-nyholm-psr7, then require /usr/share/php/Nyholm/Psr7/autoload.php)');
        }
        $psr17 = new \Nyholm\Psr7\Factory\Psr17Factory();
        $worker = new Psr7Worker($this->worker ?? Worker::create(), $psr17, $psr17, $psr17);
        $app = $this->app;
        $worker->serve(static fn (ServerRequestInterface $request): ResponseInterface =>
            $app instanceof ResponseInterface ? $app : $app->handle($request));
        return 0;
    }
}
