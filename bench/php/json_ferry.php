<?php

// bench/compression.sh's Ferry worker: "/" says hello (the harness's check), anything else the JSON.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';
require __DIR__ . '/json_payload.php';

$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    if ($req->path === '/') {
        $worker->respond(200, ['Content-Type' => 'text/plain'], 'Hello, World!');
        continue;
    }
    $worker->respond(200, ['Content-Type' => 'application/json'], bench_json_payload());
}
