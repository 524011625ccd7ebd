<?php

// Serves normally but ignores the stop frame (and EOF) and SIGTERM: only SIGKILL ends it.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

if (function_exists('pcntl_signal')) {
    pcntl_signal(SIGTERM, SIG_IGN);
    pcntl_signal(SIGINT, SIG_IGN);
}

$worker = Ferry\Worker\Worker::create();
while ($worker->waitRequest() !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'slow stop');
}
fwrite(STDERR, "slow_stop.php: told to stop, sleeping instead\n");
while (true) {
    sleep(1);
}
