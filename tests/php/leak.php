<?php

// Leaks 1 MB per request (memory-limit tests); the body is memory_get_usage() in bytes.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
$worker->serve(static function (Ferry\Worker\Request $req): array {
    static $leak = [];
    $leak[] = str_repeat(chr(count($leak) % 256), 1 << 20);
    return [200, ['Content-Type' => 'text/plain', 'X-Worker-Pid' => (string) getmypid()], (string) memory_get_usage()];
});
