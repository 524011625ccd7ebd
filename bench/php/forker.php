<?php

// Benchmark-only (bench/recycle.sh, pair `forkext`): what fork-mode recycling costs the machine without ferry.
// Loads Ferry's worker library as a fork template does, then every PERIOD seconds (argv[1]) forks FORKS times
// (argv[2], default 2: as the template did per new worker until 4895508, a middle process and the worker; 0: it only
// wakes), and each child ends at once with SIGKILL (no PHP teardown, as a forked worker's fast exit). Runs
// until it is killed; each round is a line on stdout. With argv[3], a file path, it creates that file once it
// has booted and then waits a random part of one period before its first round: the caller starts its
// measurement after the file appears, so that the forker's own PHP boot is not counted as forks. With argv[4],
// LIFE_MS > 0, each child sleeps that long before it ends (as a worker that lives between its fork and its
// exit; it touches nothing meanwhile), and the forker reaps them without waiting; on SIGTERM it kills and reaps
// the children still alive before it ends, so that no exit of theirs falls into the caller's next run.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

class_exists(Ferry\Worker\Worker::class); // loaded, as in a template that booted the hello worker

$period = (float) ($argv[1] ?? 0);
$whole = static fn (string $v): bool => preg_match('/^[0-9]+$/D', $v) === 1;
$forks = (int) ($argv[2] ?? 2);
$ready = isset($argv[3]) && $argv[3] !== '' ? $argv[3] : null;
$lifeMs = (int) ($argv[4] ?? 0);
if ($period <= 0 || !$whole($argv[2] ?? '2') || !$whole($argv[4] ?? '0')) {
    fwrite(STDERR, "usage: php forker.php PERIOD_SECONDS [FORKS [READY_FILE [LIFE_MS]]]\n");
    exit(2);
}
if ($ready !== null) {
    if (file_put_contents($ready, "ready\n") === false) {
        fwrite(STDERR, "forker: cannot create $ready\n");
        exit(1);
    }
    usleep(random_int(0, (int) ($period * 1e6)));
}
$children = [];
pcntl_async_signals(true);
pcntl_signal(SIGTERM, static function () use (&$children): void {
    foreach ($children as $pid => $_) {
        posix_kill($pid, SIGKILL);
        pcntl_waitpid($pid, $status);
    }
    exit(0);
});
for (;;) {
    for ($i = 0; $i < $forks; ++$i) {
        $pid = pcntl_fork();
        if ($pid === -1) {
            fwrite(STDERR, 'forker: fork failed: ' . pcntl_strerror(pcntl_get_last_error()) . "\n");
            exit(1);
        }
        if ($pid === 0) {
            if ($lifeMs > 0) {
                usleep($lifeMs * 1000);
            }
            posix_kill(posix_getpid(), SIGKILL);
        }
        if ($lifeMs === 0) {
            pcntl_waitpid($pid, $status);
        } else {
            $children[$pid] = true;
        }
    }
    while ($lifeMs > 0 && ($pid = pcntl_waitpid(-1, $status, WNOHANG)) > 0) {
        unset($children[$pid]);
    }
    echo "\n";
    usleep((int) ($period * 1e6));
}
