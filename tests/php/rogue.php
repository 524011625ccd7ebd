<?php

// A worker written without Ferry's library, speaking Goridge frames by hand the way any RoadRunner-style
// worker can, and misbehaving on request (issue 5). JSON context only.
//   /twice[?late_ms=N]   two response frames for one request, two writes (the second N ms late)
//   /twice?together=1    the same two frames in one write
//   /half                half a frame header on stdout, then hangs (a stuck worker)
//   /hang?s=N            no answer for N seconds (default 60)
//   /spam-stderr?mb=N    N MiB to stderr, then an answer
//   /child               starts `sleep 600` in the background (a child of the worker), answers its pid
//   anything else        {"path": ..., "pid": ...}
declare(strict_types=1);

function frame(int $flags, string $payload, array $options = [], int $stream = 0): string
{
    $words = 3 + count($options);
    $head = chr(0x10 | $words) . chr($flags) . pack('V', strlen($payload));
    $head .= pack('V', crc32($head)) . chr($stream) . "\0";
    foreach ($options as $o) {
        $head .= pack('V', $o);
    }
    return $head . $payload;
}

function read_exact(int $n): ?string
{
    $buf = '';
    while (strlen($buf) < $n) {
        $chunk = fread(STDIN, $n - strlen($buf));
        if ($chunk === false || $chunk === '') {
            return null;
        }
        $buf .= $chunk;
    }
    return $buf;
}

function read_frame(): ?array
{
    $head = read_exact(12);
    if ($head === null) {
        return null;
    }
    $words = ord($head[0]) & 0x0f;
    $flags = ord($head[1]);
    $len = unpack('V', substr($head, 2, 4))[1];
    $opts = [];
    if ($words > 3) {
        $raw = read_exact(4 * ($words - 3));
        $opts = array_values(unpack('V*', $raw));
    }
    $payload = $len > 0 ? read_exact($len) : '';
    return [$flags, $opts, $payload];
}

function respond(int $status, string $body): void
{
    $ctx = json_encode(['status' => $status, 'headers' => ['Content-Type' => ['text/plain']]]);
    fwrite(STDOUT, frame(0, $ctx . $body, [strlen($ctx)]));
    fflush(STDOUT);
}

$pid = getmypid();
while (($f = read_frame()) !== null) {
    [$flags, $opts, $payload] = $f;
    if ($flags & 0x01) { // control: PID handshake or stop
        $msg = json_decode($payload, true);
        if (isset($msg['stop'])) {
            exit(0);
        }
        fwrite(STDOUT, frame(0x01, json_encode(['pid' => $pid])));
        fflush(STDOUT);
        continue;
    }
    $ctx = json_decode(substr($payload, 0, $opts[0] ?? 0), true);
    $uri = parse_url($ctx['uri'] ?? '/');
    $path = $uri['path'] ?? '/';
    parse_str($ctx['rawQuery'] ?? '', $query);
    if ($path === '/twice' && isset($query['together'])) {
        $ctx = json_encode(['status' => 200, 'headers' => []]);
        $one = frame(0, $ctx . "first answer of /twice from $pid", [strlen($ctx)]);
        $two = frame(0, $ctx . "second answer of /twice from $pid", [strlen($ctx)]);
        fwrite(STDOUT, $one . $two);
        fflush(STDOUT);
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
    if ($path === '/half') {
        fwrite(STDOUT, substr(frame(0, 'xxxxxxxxxxxx', [0]), 0, 6));
        fflush(STDOUT);
        sleep(60);
        continue;
    }
    if ($path === '/hang') {
        sleep((int) ($query['s'] ?? 60));
        respond(200, 'woke up');
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
