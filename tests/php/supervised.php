<?php

// Supervisor tests: every request answers this worker's pid, its job count and its RSS in bytes
// (/proc/self/statm) as "pid jobs rss"; LEAK_MB leaks that many megabytes (touched, so resident) per request,
// SLEEP_MS sleeps that long per request.
declare(strict_types=1);

ini_set('memory_limit', '-1');
require __DIR__ . '/../../php-worker/autoload.php';

$leakMb = (int) (getenv('LEAK_MB') ?: 0);
$sleepMs = (int) (getenv('SLEEP_MS') ?: 0);
$leak = [];
$jobs = 0;
$worker = Ferry\Worker\Worker::create();
while ($worker->waitRequest() !== null) {
    ++$jobs;
    if ($leakMb > 0) {
        $leak[] = str_repeat(chr($jobs % 256), $leakMb << 20);
    }
    if ($sleepMs > 0) {
        usleep($sleepMs * 1000);
    }
    $statm = explode(' ', (string) file_get_contents('/proc/self/statm'));
    $rss = (int) $statm[1] * 4096;
    $worker->respond(200, ['Content-Type' => 'text/plain'], getmypid() . " $jobs $rss");
}
