<?php

// Echo worker for the tests: describes each request as JSON; special paths trigger behaviours.
//   /big?n=N  N bytes of 'x'           /echo-body  the raw body back     /status/NNN  that status
//   /sleep?ms=N  sleeps first           /error  throws (ERROR frame)       /exit  exit(3) mid-request
//   /stdout  echoes stray output first  /stop  requestStop() once per $FERRY_TEST_STOP_ONCE file
//   /stop-always  requestStop() every time
//   /head-length  empty body with Content-Length: 1234 (an app answering HEAD itself)
//   /trailers  X-Checksum sent as a trailer (named in the Trailer header)
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

use Ferry\Worker\Request;
use Ferry\Worker\Response;
use Ferry\Worker\Worker;

$worker = Worker::create();
$pid = getmypid();

$worker->serve(static function (Request $req) use ($worker, $pid): Response|Ferry\Worker\StreamedResponse|null {
    $path = $req->path;
    if ($path === '/big') {
        $n = max(0, (int) ($req->query['n'] ?? 0));
        return new Response(200, ['Content-Type' => 'application/octet-stream'], str_repeat('x', $n));
    }
    if ($path === '/head-length') {
        // As an app answering HEAD itself: no body, but the length the GET body would have.
        return new Response(200, ['Content-Type' => 'text/plain', 'Content-Length' => '1234'], '');
    }
    if ($path === '/echo-body') {
        $type = $req->header('Content-Type') ?? 'application/octet-stream';
        return new Response(200, ['Content-Type' => $type, 'X-Worker-Pid' => (string) $pid], $req->body);
    }
    if (preg_match('#^/status/(\d{1,3})$#', $path, $m) === 1) {
        return new Response((int) $m[1], ['X-Worker-Pid' => (string) $pid], "status {$m[1]}\n");
    }
    if ($path === '/sse') {
        $n = max(1, (int) ($req->query['n'] ?? 3));
        return Ferry\Worker\StreamedResponse::sse((static function () use ($n): Generator {
            for ($i = 1; $i <= $n; $i++) {
                yield ['event' => 'tick', 'id' => (string) $i, 'data' => "line $i\nsecond line"];
            }
        })());
    }
    if ($path === '/trailers') {
        // RoadRunner's rule: headers named in Trailer are sent after the body.
        return new Response(200, ['Content-Type' => 'text/plain', 'Trailer' => 'X-Checksum',
            'X-Checksum' => md5('trailed body')], 'trailed body');
    }
    if ($path === '/hints') {
        $worker->earlyHints(['Link' => ['</a.css>; rel=preload; as=style', '</b.js>; rel=preload; as=script']]);
        return new Response(200, ['Content-Type' => 'text/plain'], "hinted\n");
    }
    if ($path === '/sleep') {
        usleep(1000 * max(0, (int) ($req->query['ms'] ?? 0)));
    }
    if ($path === '/error') {
        throw new RuntimeException('boom from echo.php');
    }
    if ($path === '/exit') {
        exit(3);
    }
    if ($path === '/stdout') {
        echo "stray output from app\n";
    }
    if ($path === '/stop-always') {
        $worker->requestStop(); // every worker refuses: the server must give up, not loop
        return null;
    }
    if ($path === '/stop') {
        $flag = getenv('FERRY_TEST_STOP_ONCE');
        if (is_string($flag) && $flag !== '' && !file_exists($flag)) {
            touch($flag);
            $worker->requestStop();
            return null;
        }
    }

    $uploads = $req->uploads;
    if (is_array($uploads)) {
        $uploads = describeUploads($uploads);
    }
    $body = json_encode([
        'method' => $req->method,
        'uri' => $req->uri,
        'path' => $req->path,
        'rawQuery' => $req->rawQuery,
        'query' => $req->query,
        'protocol' => $req->protocol,
        'headers' => (object) $req->headers,
        'cookies' => (object) $req->cookies,
        'remoteAddr' => $req->remoteAddr,
        'bodyLength' => strlen($req->body),
        'bodyMd5' => md5($req->body),
        'parsed' => $req->parsed,
        'form' => $req->form,
        'uploads' => $uploads,
        'attributes' => (object) $req->attributes,
        'codec' => $req->codec === Ferry\Worker\Frame::MSGPACK ? 'msgpack' : 'json',
        'pid' => $pid,
    ], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE | JSON_THROW_ON_ERROR);

    return new Response(200, [
        'Content-Type' => 'application/json',
        'X-Worker-Pid' => (string) $pid,
        'Set-Cookie' => ['a=1', 'b=2'],
    ], $body);
});

/**
 * Upload tree with each file's content length and md5 (read from tmpName while it still exists).
 *
 * @param array<mixed> $tree
 * @return array<mixed>
 */
function describeUploads(array $tree): array
{
    if (array_key_exists('tmpName', $tree) && array_key_exists('error', $tree) && !is_array($tree['error'])) {
        $tmp = $tree['tmpName'];
        $content = is_string($tmp) && is_file($tmp) ? file_get_contents($tmp) : false;
        $tree['contentLength'] = $content === false ? null : strlen($content);
        $tree['contentMd5'] = $content === false ? null : md5($content);
        return $tree;
    }
    foreach ($tree as $k => $v) {
        if (is_array($v)) {
            $tree[$k] = describeUploads($v);
        }
    }
    return $tree;
}
