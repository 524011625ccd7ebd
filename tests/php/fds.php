<?php

// Reports its open file descriptors on stderr, one "fd target" line each, then "end"; then waits for EOF on
// stdin and exits. No handshake: for the fd-inheritance test (tests/unit/pool/launch_test.cpp), which starts
// it through the launch code.
declare(strict_types=1);

foreach (scandir('/proc/self/fd') as $fd) {
    if ($fd === '.' || $fd === '..') {
        continue;
    }
    $target = @readlink("/proc/self/fd/$fd");
    fwrite(STDERR, $fd . ' ' . ($target === false ? '?' : $target) . "\n");
}
fwrite(STDERR, "end\n");
stream_get_contents(STDIN);
