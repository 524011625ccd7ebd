<?php

// A worker that behaves on the pipes as RoadRunner's own PHP packages do (spiral/goridge 4.x StreamRelay,
// spiral/roadrunner-worker 3.x, spiral/roadrunner-http 3.4/3.5 PSR7Worker; docs/protocol.md §1-§4), written
// without them (they cannot be installed from this machine's registries) and without Ferry's library:
//   - the 12-byte frame header is read with ONE fread(STDIN, 12); a short read kills the worker, as goridge does;
//   - PID handshake, {"stop":true} → exit 0; JSON request contexts only (it announces no codec);
//   - parsed: true → the body is the JSON form tree; uploads → files built from tmpName (as UploadedFile);
//   - answers with flags 0 (roadrunner-http 3.4) or 0x08 (3.5+, RR_FIXTURE_FLAGS=json);
//   - /early-hints: a 103 frame (STREAM, no body) before the 200;
//   - /stream?n=N: N chunks as a generator response: STREAM on all but the last, PING on every 5th stream frame
//     and a wait for the PONG; a STOP stream byte ends the stream early (then one final frame);
//   - /globals: what the process looks like from the script (its top-level variables global, argv, the script
//     file, the request time PHP set at its start, mt_rand, which Ferry classes exist) for the PHP-level fork
//     template's tests (tests/e2e/test_fork.py);
//   - RR_FIXTURE_APP=DIR: DIR/boot.php is required before the handshake, as a framework boots (bench/recycle.sh
//     APP_CLASSES: a generated app, bench/boot_cost.py --write-app);
//   - RR_FIXTURE_HELLO=1: "Hello, World!" for every request, after decoding its context (bench/recycle.sh WORKER=rr).
declare(strict_types=1);

const F_CONTROL = 0x01;
const F_JSON = 0x08;
const F_ERROR = 0x40;
const S_STREAM = 0x01;
const S_STOP = 0x02;
const S_PING = 0x04;
const S_PONG = 0x08;

function fail(string $why): never
{
    fwrite(STDERR, "rr_worker: $why\n");
    exit(1);
}

function read_exact(int $n): string
{
    $out = '';
    while (strlen($out) < $n) {
        $chunk = fread(STDIN, $n - strlen($out));
        if ($chunk === false || $chunk === '') {
            fail('stdin closed mid-frame');
        }
        $out .= $chunk;
    }
    return $out;
}

/** @return array{flags:int, stream:int, options:list<int>, payload:string}|null */
function read_frame(): ?array
{
    $head = fread(STDIN, 12); // one read, as goridge's StreamRelay
    if ($head === false || $head === '') {
        return null;
    }
    if (strlen($head) !== 12) {
        fail('short frame header read (' . strlen($head) . ' bytes): the header must come in one write');
    }
    $h = unpack('Cvl/Cflags/Vlen/Vcrc/Cstream/Creserved', $head);
    if (($h['vl'] >> 4) !== 1 || crc32(substr($head, 0, 6)) !== $h['crc']) {
        fail('bad frame header');
    }
    $words = $h['vl'] & 0x0f;
    $options = $words > 3 ? array_values(unpack('V*', read_exact(($words - 3) * 4))) : [];
    return ['flags' => $h['flags'], 'stream' => $h['stream'], 'options' => $options,
            'payload' => $h['len'] > 0 ? read_exact($h['len']) : ''];
}

function write_frame(int $flags, string $payload, array $options = [], int $stream = 0): void
{
    $words = 3 + count($options);
    $head = pack('CCV', 0x10 | $words, $flags, strlen($payload));
    $head .= pack('V', crc32($head)) . pack('CC', $stream, 0);
    foreach ($options as $o) {
        $head .= pack('V', $o);
    }
    fwrite(STDOUT, $head . $payload);
    fflush(STDOUT);
}

function respond(int $status, array $headers, string $body, int $stream = 0): void
{
    $ctx = json_encode(['status' => $status, 'headers' => (object) $headers], JSON_THROW_ON_ERROR);
    $flags = getenv('RR_FIXTURE_FLAGS') === 'json' ? F_JSON : 0;
    write_frame($flags, $ctx . $body, [strlen($ctx)], $stream);
}

/** Uploaded files as roadrunner-http builds UploadedFile objects: from tmpName, when error is 0. */
function files(array $tree): array
{
    if (isset($tree['tmpName'], $tree['error']) && !is_array($tree['error'])) {
        $ok = $tree['error'] === UPLOAD_ERR_OK && is_file($tree['tmpName']);
        return ['name' => $tree['name'], 'mime' => $tree['mime'], 'size' => $tree['size'],
                'error' => $tree['error'], 'md5' => $ok ? md5_file($tree['tmpName']) : null];
    }
    return array_map(static fn ($v) => is_array($v) ? files($v) : $v, $tree);
}

if ((string) getenv('RR_FIXTURE_APP') !== '') {
    require getenv('RR_FIXTURE_APP') . '/boot.php';
}

$handshake = read_frame();
if ($handshake === null) {
    exit(0); // stdin closed before any frame: nothing to serve (an external boot, bench/recycle.sh WORKER=rr)
}
if (!($handshake['flags'] & F_CONTROL)) {
    fail('no PID handshake');
}
write_frame(F_CONTROL, json_encode(['pid' => getmypid()]));
$hello = getenv('RR_FIXTURE_HELLO') === '1';

while (($frame = read_frame()) !== null) {
    if ($frame['flags'] & F_CONTROL) {
        $msg = json_decode($frame['payload'], true);
        if (($msg['stop'] ?? false) === true) {
            exit(0);
        }
        continue;
    }
    $ctxLen = $frame['options'][0] ?? 0;
    $ctx = json_decode(substr($frame['payload'], 0, $ctxLen), true, 512, JSON_THROW_ON_ERROR);
    $body = substr($frame['payload'], $ctxLen);
    $path = parse_url($ctx['uri'], PHP_URL_PATH);
    if ($hello) {
        respond(200, ['Content-Type' => ['text/plain']], 'Hello, World!');
        continue;
    }
    parse_str($ctx['rawQuery'] ?? '', $query);

    if ($path === '/globals') {
        respond(200, ['Content-Type' => ['application/json']], json_encode([
            'pid' => getmypid(),
            'global' => isset($GLOBALS['handshake']),
            'argv' => $argv,
            'script' => get_included_files()[0],
            'requestTime' => $_SERVER['REQUEST_TIME_FLOAT'],
            'rand' => mt_rand(),
            'library' => class_exists('Ferry\\Worker\\Frame', false),
            'opcacheHits' => function_exists('opcache_get_status')
                ? (opcache_get_status(false)['opcache_statistics']['hits'] ?? null) : null,
        ], JSON_THROW_ON_ERROR));
        continue;
    }
    if ($path === '/early-hints') {
        respond(103, ['Link' => ['</style.css>; rel=preload; as=style']], '', S_STREAM);
        respond(200, ['Content-Type' => ['text/plain']], "after hints\n");
        continue;
    }
    if ($path === '/stream') {
        $n = max(1, (int) ($query['n'] ?? 12));
        $sent = 0;
        $stopped = false;
        for ($i = 1; $i < $n; ++$i) {
            $ping = (++$sent % 5) === 0;
            respond(200, ['Content-Type' => ['text/plain']], "chunk $i\n", S_STREAM | ($ping ? S_PING : 0));
            if ($ping) {
                $reply = read_frame(); // PONG, or STOP when the client went away
                if ($reply === null) {
                    exit(0);
                }
                if ($reply['stream'] & S_STOP) {
                    $stopped = true;
                    break;
                }
                if (!($reply['stream'] & S_PONG)) {
                    fail('expected a PONG, got stream byte ' . $reply['stream']);
                }
            }
        }
        respond(200, ['Content-Type' => ['text/plain']], $stopped ? '' : "chunk $n\n");
        continue;
    }

    $parsed = null;
    if ($ctx['parsed'] ?? false) {
        $parsed = $body === '' ? [] : json_decode($body, true, 512, JSON_THROW_ON_ERROR);
    }
    $out = json_encode([
        'method' => $ctx['method'],
        'uri' => $ctx['uri'],
        'remoteAddr' => $ctx['remoteAddr'],
        'parsed' => $ctx['parsed'] ?? false,
        'parsedBody' => $parsed,
        'files' => is_array($ctx['uploads'] ?? null) ? files($ctx['uploads']) : null,
        'bodyLength' => ($ctx['parsed'] ?? false) ? 0 : strlen($body),
        'pid' => getmypid(),
    ], JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
    respond(200, ['Content-Type' => ['application/json']], $out);
}
