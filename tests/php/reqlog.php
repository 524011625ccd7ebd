<?php

// Request-log worker for the malformed-request tests: for each request it receives, appends one line
// "METHOD PATH" (the path without the query, as PHP sees it; control bytes escaped so a line stays one
// line) to the file named by $FERRY_TEST_REQLOG, then answers 200 with a JSON description of what it saw.
// The log is how a test proves which requests reached PHP (and that a smuggled one never did).
// ?sleep_ms=N sleeps N ms after logging (a slow request).
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$log = getenv('FERRY_TEST_REQLOG');
if (!is_string($log) || $log === '') {
    fwrite(STDERR, "reqlog.php: FERRY_TEST_REQLOG is not set\n");
    exit(1);
}

$worker = Ferry\Worker\Worker::create();
$pid = getmypid();
while (($req = $worker->waitRequest()) !== null) {
    $line = addcslashes($req->method, "\0..\37\177\\") . ' ' . addcslashes($req->path, "\0..\37\177\\") . "\n";
    // One write with O_APPEND (and a lock): lines from the two workers never interleave.
    file_put_contents($log, $line, FILE_APPEND | LOCK_EX);
    $sleep = (int) ($req->query['sleep_ms'] ?? 0);
    if ($sleep > 0) {
        usleep(1000 * $sleep);
    }
    $body = json_encode([
        'method' => $req->method,
        'uri' => $req->uri,
        'path' => $req->path,
        'rawQuery' => $req->rawQuery,
        'protocol' => $req->protocol,
        'headers' => (object) $req->headers,
        'bodyLength' => strlen($req->body),
        'body' => strlen($req->body) <= 4096 ? $req->body : null,
        'pid' => $pid,
    ], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE | JSON_THROW_ON_ERROR);
    $worker->respond(200, ['Content-Type' => 'application/json'], $body);
}
