<?php

// For recycling at idle priority: sleeps BOOT_MS before its handshake (so that a test can look at a booting
// worker), answers every request with its pid, and sleeps EXIT_MS after its stop frame (a retired worker's
// exit that a test can look at).
declare(strict_types=1);

usleep(1000 * (int) (getenv('BOOT_MS') ?: 0));
require __DIR__ . '/../../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while ($worker->waitRequest() !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], (string) getmypid());
}
usleep(1000 * (int) (getenv('EXIT_MS') ?: 0));
