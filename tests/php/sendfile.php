<?php

// Worker for tests/e2e/test_sendfile.py: answers with an X-Sendfile header naming ?path= (the server sends the
// file when http.middleware has "sendfile"); /type answers the X-Sendfile-Type the request carried.
//   /?path=P[&status=N][&etag=E][&ctype=T]
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    if ($req->path === '/type') {
        $worker->respond(200, ['Content-Type' => 'text/plain'], (string) ($req->header('X-Sendfile-Type') ?? '-'));
        continue;
    }
    $headers = ['X-Sendfile' => (string) ($req->query['path'] ?? ''), 'X-App' => 'yes'];
    if (isset($req->query['etag'])) {
        $headers['ETag'] = (string) $req->query['etag'];
    }
    if (isset($req->query['ctype'])) {
        $headers['Content-Type'] = (string) $req->query['ctype'];
    }
    $headers['Content-Length'] = '999999'; // ignored: the server says how long the file is
    $worker->respond((int) ($req->query['status'] ?? 200), $headers, 'this body is not sent');
}
