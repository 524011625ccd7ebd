<?php

// A streaming worker on Ferry's library (no raw frames): per request 103 Early Hints, then five chunks (the
// fifth with PING, answered by PONG) and the final frame. /stream-long streams 50 chunks of 1 KiB, 20 ms
// apart, and stops early when the server sends STOP (the client went away).
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

use Ferry\Worker\Worker;

$worker = Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    if ($req->path === '/stream-long') {
        $chunks = (static function (): Generator {
            for ($i = 0; $i < 50; $i++) {
                yield str_repeat(chr(ord('a') + $i % 26), 1024);
                usleep(20000);
            }
        })();
        if (!$worker->stream(200, ['Content-Type' => 'text/plain'], $chunks)) {
            fwrite(STDERR, "stream stopped by the server\n");
        }
        continue;
    }
    $worker->earlyHints(['Link' => '</style.css>; rel=preload; as=style']);
    $worker->stream(200, ['Content-Type' => 'text/plain', 'X-Streamed' => 'yes'],
        ["one\n", "two\n", "three\n", "four\n", "five\n"]);
}
