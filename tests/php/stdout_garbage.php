<?php

// Prints to stdout before the library (and its stdout guard) is loaded: the server must report
// the non-frame bytes. Then runs the normal loop.
declare(strict_types=1);

echo "hello from a stray echo\n";

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while ($worker->waitRequest() !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'Hello, World!');
}
