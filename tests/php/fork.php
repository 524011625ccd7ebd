<?php

// Worker for the fork-template tests (http.pool.fork): tells apart what it booted and who it is now.
//   /         JSON: pid (getmypid() now), boot (the pid that ran the boot code), ppid, pgid, rand (mt_rand())
//   /exit     exit(3) mid-request               /stderr  a line on STDERR naming its pid
//   /sleep?ms=N  sleeps first
// FERRY_TEST_BOOT_LOG: a file that gets one line per boot (the booting pid); FERRY_TEST_BOOT_MS: a slow boot.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$bootPid = getmypid();
$log = getenv('FERRY_TEST_BOOT_LOG');
if (is_string($log) && $log !== '') {
    file_put_contents($log, "$bootPid\n", FILE_APPEND);
}
$worker = Ferry\Worker\Worker::create();
usleep(1000 * (int) (getenv('FERRY_TEST_BOOT_MS') ?: 0)); // the application's boot: once per template

while (($req = $worker->waitRequest()) !== null) {
    if ($req->path === '/exit') {
        exit(3);
    }
    if ($req->path === '/stderr') {
        fwrite(STDERR, 'forked worker stderr ' . getmypid() . "\n");
    }
    if ($req->path === '/sleep') {
        usleep(1000 * max(0, (int) ($req->query['ms'] ?? 0)));
    }
    $worker->respond(200, ['Content-Type' => 'application/json'], json_encode([
        'pid' => getmypid(),
        'boot' => $bootPid,
        'ppid' => posix_getppid(),
        'pgid' => posix_getpgid(0),
        'rand' => mt_rand(),
    ]));
}
