<?php

// PSR-7 bridge worker with Nyholm's PSR-17 factories: "Hello, World!".
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';
require '/usr/share/php/Nyholm/Psr7/autoload.php';

use Ferry\Worker\Psr7Worker;
use Ferry\Worker\Worker;
use Nyholm\Psr7\Factory\Psr17Factory;

$psr17 = new Psr17Factory();
$worker = new Psr7Worker(Worker::create(), $psr17, $psr17, $psr17);
while ($request = $worker->waitRequest()) {
    $worker->respond($psr17->createResponse(200)
        ->withHeader('Content-Type', 'text/plain')
        ->withBody($psr17->createStream('Hello, World!')));
}
