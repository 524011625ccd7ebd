<?php

// A worker that misbehaves on request (issue 5): it encodes and reads frames with the library's codec
// (Frame, StreamRelay) but drives the protocol itself, so it can write what no correct worker writes.
// JSON context only.
//   /twice[?late_ms=N]   two response frames for one request, two writes (the second N ms late)
//   /twice?together=1    the same two frames in one write
//   /half                half a frame header on stdout, then hangs (a stuck worker)
//   /many-headers?n=N    N response headers; /big-header?kb=N: one header of N KiB
//   /hang?s=N            no answer for N seconds (default 60)
//   /stream-hang?s=N     a streamed response's head and first chunk, then nothing for N seconds
//   /spam-stderr?mb=N    N MiB to stderr, then an answer
//   /child               starts `sleep 600` in the background (a child of the worker), answers its pid
//   anything else        {"path": ..., "pid": ...}
declare(strict_types=1);

use Ferry\Worker\Frame;
use Ferry\Worker\StreamRelay;

require __DIR__ . '/../../php-worker/autoload.php';

$relay = StreamRelay::stdio();

function respond(int $status, string $body): void
{
    global $relay;
    $ctx = json_encode(['status' => $status, 'headers' => ['Content-Type' => ['text/plain']]]);
    $relay->send(Frame::pack(0, $ctx . $body, [strlen($ctx)]));
}

$pid = getmypid();
while (($f = $relay->receive()) !== null) {
    [$flags, $opts, $payload] = [$f->flags, $f->options, $f->payload];
    if ($flags & Frame::CONTROL) { // PID handshake or stop
        $msg = json_decode($payload, true);
        if (isset($msg['stop'])) {
            exit(0);
        }
        $relay->send(Frame::pack(Frame::CONTROL, json_encode(['pid' => $pid])));
        continue;
    }
    $ctx = json_decode(substr($payload, 0, $opts[0] ?? 0), true);
    $uri = parse_url($ctx['uri'] ?? '/');
    $path = $uri['path'] ?? '/';
    parse_str($ctx['rawQuery'] ?? '', $query);
    if ($path === '/twice' && isset($query['together'])) {
        $ctx = json_encode(['status' => 200, 'headers' => []]);
        $one = Frame::pack(0, $ctx . "first answer of /twice from $pid", [strlen($ctx)]);
        $two = Frame::pack(0, $ctx . "second answer of /twice from $pid", [strlen($ctx)]);
        $relay->send($one . $two); // two frames in one write
        continue;
    }
    if ($path === '/twice') {
        respond(200, "first answer of /twice from $pid");
        if (isset($query['late_ms'])) {
            usleep(1000 * (int) $query['late_ms']);
        }
        respond(200, "second answer of /twice from $pid");
        continue;
    }
    if ($path === '/many-headers' || $path === '/big-header') { // issue 41 item 10: response heads past the caps
        $headers = [];
        if ($path === '/many-headers') {
            for ($i = 0; $i < (int) ($query['n'] ?? 100000); $i++) {
                $headers["X-H$i"] = ['v'];
            }
        } else {
            $headers['X-Big'] = [str_repeat('b', 1024 * (int) ($query['kb'] ?? 10240))];
        }
        $ctx = json_encode(['status' => 200, 'headers' => $headers]);
        $relay->send(Frame::pack(0, $ctx . 'headers sent', [strlen($ctx)]));
        continue;
    }
    if ($path === '/half') {
        fwrite(STDOUT, substr(Frame::pack(0, 'xxxxxxxxxxxx', [0]), 0, 6)); // half a header
        fflush(STDOUT);
        sleep(60);
        continue;
    }
    if ($path === '/hang') {
        sleep((int) ($query['s'] ?? 60));
        respond(200, 'woke up');
        continue;
    }
    if ($path === '/stream-hang') {
        $head = json_encode(['status' => 200, 'headers' => ['Content-Type' => ['text/plain']]]);
        $relay->send(Frame::pack(0, $head . "first chunk\n", [strlen($head)], Frame::STREAM));
        sleep((int) ($query['s'] ?? 60));
        $relay->send(Frame::pack(0, $head . "woke up\n", [strlen($head)]));
        continue;
    }
    if ($path === '/spam-stderr') {
        $line = str_repeat('e', 1023) . "\n";
        $n = 1024 * (int) ($query['mb'] ?? 1);
        for ($i = 0; $i < $n; $i++) {
            fwrite(STDERR, $line);
        }
        respond(200, "spammed $n KiB");
        continue;
    }
    if ($path === '/child') {
        $child = (int) trim((string) shell_exec('sleep 600 > /dev/null 2>&1 & echo $!'));
        respond(200, json_encode(['pid' => $pid, 'child' => $child]));
        continue;
    }
    respond(200, json_encode(['path' => $path, 'pid' => $pid]));
}
