<?php

// Boots and serves until GET /break, which leaves a flag file ($FERRY_TEST_FLAKY_FLAG) and exits mid-request.
// With the flag present it fails to boot like a broken app would: a fatal error naming a path on stderr,
// exit code 2.
declare(strict_types=1);

$flag = (string) getenv('FERRY_TEST_FLAKY_FLAG');
if ($flag !== '' && file_exists($flag)) {
    fwrite(STDERR, "PHP Fatal error:  Uncaught Error: Class \"App\\Kernel\" not found in /secret/app/bootstrap.php:12\n");
    exit(2);
}

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while ($req = $worker->waitRequest()) {
    if ($req->path === '/break') {
        touch($flag);
        exit(3);
    }
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'ok');
}
