<?php

// Benchmark-only worker (bench/recycle.sh, pair `reexec`): hello world that recycles itself in place. After
// its Nth request (argv[1]) it replaces its own image with a fresh PHP running the same command line
// (pcntl_exec: same PID, same pipes, so the server never sees it), which boots and serves on without a
// handshake. It measures what a fresh PHP image costs when the process (the kernel's task) stays the same,
// against max_jobs recycling, where every new image is a new process. Not a feature: the server does not know
// the worker is booting, so the request it sends meanwhile waits in the pipe for the boot.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

use Ferry\Worker\StdoutGuard;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\Worker;

$limit = (int) ($argv[1] ?? 0);
if ($limit < 1) {
    fwrite(STDERR, "usage: php hello_reexec.php REQUESTS\n");
    exit(2);
}
if (!function_exists('pcntl_exec')) {
    fwrite(STDERR, "hello_reexec.php needs ext-pcntl (pcntl_exec)\n");
    exit(2);
}
if (getenv('FERRY_BENCH_REEXEC') === '1') {
    // A re-exec'd image: the server did the handshake with the first one.
    StdoutGuard::install();
    $worker = new Worker(StreamRelay::stdio(), null, false);
} else {
    $worker = Worker::create();
}
$served = 0;
while ($worker->waitRequest() !== null) {
    $worker->respond(200, ['Content-Type' => 'text/plain'], 'Hello, World!');
    if (++$served < $limit) {
        continue;
    }
    // The same command line, PHP's flags included (PHP keeps no list of its -d options).
    $args = explode("\0", rtrim((string) file_get_contents('/proc/self/cmdline'), "\0"));
    fwrite(STDERR, "ferry bench: re-exec at $served requests\n");
    pcntl_exec(PHP_BINARY, array_slice($args, 1), ['FERRY_BENCH_REEXEC' => '1'] + getenv());
    fwrite(STDERR, 'ferry bench: pcntl_exec failed: ' . pcntl_strerror(pcntl_get_last_error()) . "\n");
    exit(1);
}
