<?php

// Benchmark-only (bench/recycle.sh, pair `forkext`): what fork-mode recycling costs the machine without ferry.
// Loads Ferry's worker library as a fork template does, then every PERIOD seconds (argv[1]) forks FORKS times
// (argv[2], default 2: as the template did per new worker until 4895508, a middle process and the worker; 0: it only
// wakes), and each child ends at once with SIGKILL (no PHP teardown, as a forked worker's fast exit). Runs
// until it is killed; each round is a line on stdout.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

class_exists(Ferry\Worker\Worker::class); // loaded, as in a template that booted the hello worker

$period = (float) ($argv[1] ?? 0);
$forks = (int) ($argv[2] ?? 2);
if ($period <= 0 || $forks < 0) {
    fwrite(STDERR, "usage: php forker.php PERIOD_SECONDS [FORKS]\n");
    exit(2);
}
for (;;) {
    for ($i = 0; $i < $forks; ++$i) {
        $pid = pcntl_fork();
        if ($pid === -1) {
            fwrite(STDERR, 'forker: fork failed: ' . pcntl_strerror(pcntl_get_last_error()) . "\n");
            exit(1);
        }
        if ($pid === 0) {
            posix_kill(posix_getpid(), SIGKILL);
        }
        if ($pid > 0) {
            pcntl_waitpid($pid, $status);
        }
    }
    echo "\n";
    usleep((int) ($period * 1e6));
}
