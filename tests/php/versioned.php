<?php

// Worker for the reload tests: its answer is what $FERRY_TEST_APP/version.php returns, read once at boot (as an
// application's code is), plus its pid.
//   /            "<version> <pid>"
//   /sleep?ms=N  the same after N ms
//   /rpc         the workers the server lists over RR_RPC (Ferry\Worker\Rpc), as JSON
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$app = (string) getenv('FERRY_TEST_APP');
$version = require $app . '/version.php';
$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    if ($req->path === '/sleep') {
        usleep(1000 * max(0, (int) ($req->query['ms'] ?? 0)));
    }
    if ($req->path === '/rpc') {
        try {
            $list = Ferry\Worker\Rpc::fromEnv()->workers();
            $worker->respond(200, ['Content-Type' => 'application/json'], json_encode($list));
        } catch (Throwable $e) {
            $worker->respond(500, [], $e->getMessage());
        }
        continue;
    }
    $worker->respond(200, ['Content-Type' => 'text/plain'], $version . ' ' . getmypid());
}
