<?php

// Minimal plain-API worker (benchmarks): "Hello, World!" for every request.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while ($worker->waitRequest() !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'Hello, World!');
}
