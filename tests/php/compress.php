<?php

// Worker for tests/e2e/test_compression.py: a body of ?size= bytes of JSON-like text (deterministic, so the
// test knows it), with the headers the query asks for:
//   type (Content-Type, default application/json), status, etag, cc (Cache-Control), ce (Content-Encoding),
//   vary, cr (Content-Range); stream=K: the body in K chunks, ms= apart (default 0), each a flush; trailer=1:
//   an X-Checksum trailer (crc32 of the body) after a stream.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

function body_of(int $size): string
{
    $unit = '{"id":1234,"name":"ferry","tags":["php","c++","http"],"ok":true},';
    return substr(str_repeat($unit, intdiv($size, strlen($unit)) + 1), 0, $size);
}

$worker = Ferry\Worker\Worker::create();
while (($req = $worker->waitRequest()) !== null) {
    $q = $req->query;
    $body = body_of((int) ($q['size'] ?? 20000));
    $headers = ['Content-Type' => (string) ($q['type'] ?? 'application/json')];
    foreach (['etag' => 'ETag', 'cc' => 'Cache-Control', 'ce' => 'Content-Encoding', 'vary' => 'Vary',
              'cr' => 'Content-Range'] as $key => $name) {
        if (isset($q[$key])) {
            $headers[$name] = (string) $q[$key];
        }
    }
    $status = (int) ($q['status'] ?? 200);
    if (!isset($q['stream'])) {
        $worker->respond($status, $headers, $status === 204 || $status === 304 ? '' : $body);
        continue;
    }
    $n = max(1, (int) $q['stream']);
    $ms = (int) ($q['ms'] ?? 0);
    $piece = (int) ceil(strlen($body) / $n);
    if (isset($q['trailer'])) {
        $headers['Trailer'] = 'X-Checksum';
        $headers['X-Checksum'] = (string) crc32($body);
    }
    $chunks = (static function () use ($body, $piece, $ms): Generator {
        for ($at = 0; $at < strlen($body); $at += $piece) {
            yield substr($body, $at, $piece);
            if ($ms > 0) {
                usleep($ms * 1000);
            }
        }
    })();
    $worker->stream($status, $headers, $chunks);
}
