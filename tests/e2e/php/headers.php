<?php

// Response-header edge cases for the e2e tests: each path answers with headers the server must sanitise.
//   /cl      a wrong Content-Length            /te       a Transfer-Encoding: chunked header
//   /crlf    a header value with CR LF          /badname  a header name with a space
//   /server  its own Server and Date headers    /204body  status 204 with a body
//   /empty   200 with an empty body             /cookies  50 Set-Cookie values
//   /conn    Connection: close + Keep-Alive     anything else: 200 "ok"
declare(strict_types=1);

require __DIR__ . '/../../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    switch ($req->path) {
        case '/cl':
            $worker->respond(200, ['Content-Length' => '999', 'Content-Type' => 'text/plain'], 'abc');
            break;
        case '/te':
            $worker->respond(200, ['Transfer-Encoding' => 'chunked'], 'plain body');
            break;
        case '/crlf':
            $worker->respond(200, ['X-Evil' => "a\r\nInjected: yes", 'X-Good' => 'fine'], 'crlf');
            break;
        case '/badname':
            $worker->respond(200, ['Bad Name' => 'v', 'X-Good' => 'fine'], 'badname');
            break;
        case '/server':
            $worker->respond(200, ['Server' => 'app/1.0', 'Date' => 'Thu, 01 Jan 1970 00:00:00 GMT'], 'server');
            break;
        case '/204body':
            $worker->respond(204, ['X-A' => '1'], 'this body must not be sent');
            break;
        case '/empty':
            $worker->respond(200, [], '');
            break;
        case '/cookies':
            $worker->respond(200, ['Set-Cookie' => array_map(static fn (int $i): string => "c$i=$i", range(1, 50))], 'cookies');
            break;
        case '/conn':
            $worker->respond(200, ['Connection' => 'close', 'Keep-Alive' => 'timeout=1'], 'conn');
            break;
        default:
            $worker->respond(200, ['Content-Type' => 'text/plain'], 'ok');
    }
}
