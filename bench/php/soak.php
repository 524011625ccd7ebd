<?php

// The worker of bench/soak.sh (mixed traffic for hours). RR_MODE=websockets: tests/php/ws.php (chat: open
// joins ?topics=, "pub:<topic>:<text>" publishes; SSE opens join the topics asked for). HTTP:
//   /body       a raw body (a temp file past http.limits.body_buffer_size): its length
//   /leak?kb=N  keeps N kilobytes (touched, so resident) for the life of the worker: max_worker_memory
//               recycles it; answers "leaked <total> KB"
//   /crash      exit(3) mid-request: the client gets 502
//   else        bench/php/forms_answer.php's: /form, /upload, "Hello, World!"
declare(strict_types=1);

if (getenv('RR_MODE') === 'websockets') {
    require __DIR__ . '/../../tests/php/ws.php';
    exit(0);
}

ini_set('memory_limit', '-1');
require __DIR__ . '/../../php-worker/autoload.php';
require __DIR__ . '/forms_answer.php';

$leak = [];
$leaked = 0;
$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    switch ($req->path) {
        case '/body':
            $body = (string) strlen($req->body);
            break;
        case '/leak':
            $kb = max(0, (int) ($req->query['kb'] ?? 0));
            $leak[] = str_repeat(chr(count($leak) % 256), $kb << 10);
            $leaked += $kb;
            $body = "leaked $leaked KB";
            break;
        case '/crash':
            exit(3);
        default:
            $body = formsAnswer($req);
    }
    $worker->respond(200, ['Content-Type' => 'text/plain'], $body);
}
