<?php

// A RoadRunner-style streaming worker written with raw frames (JSON context, no msgpack announced):
// per request it sends 103 Early Hints, then three STREAM chunks (the second with PING, waiting for PONG),
// then the final frame. /stream-long sends 50 chunks of 1 KiB, 20 ms apart, and stops early on STOP.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

use Ferry\Worker\Frame;
use Ferry\Worker\StreamRelay;

$relay = StreamRelay::stdio();
$hello = $relay->receive();
if ($hello === null) {
    exit(0);
}
$relay->send(Frame::pack(Frame::CONTROL, json_encode(['pid' => getmypid()])));

function chunk(StreamRelay $relay, string $body, int $stream): void
{
    $ctx = json_encode(['status' => 200, 'headers' => ['Content-Type' => ['text/plain'], 'X-Streamed' => ['yes']]]);
    $relay->send(Frame::pack(Frame::JSON, $ctx . $body, [strlen($ctx)], $stream));
}

while (($frame = $relay->receive()) !== null) {
    if (($frame->flags & Frame::CONTROL) !== 0) {
        exit(0); // stop
    }
    if (count($frame->options) !== 1) {
        fwrite(STDERR, "unexpected frame (stream byte {$frame->stream}) where a request was due\n");
        exit(1);
    }
    $ctx = json_decode(substr($frame->payload, 0, $frame->options[0]), true);
    $path = parse_url($ctx['uri'], PHP_URL_PATH);
    if ($path === '/stream-long') {
        for ($i = 0; $i < 50; $i++) {
            $ping = ($i % 5 === 4) ? Frame::STREAM_PING : 0;
            chunk($relay, str_repeat(chr(ord('a') + $i % 26), 1024), Frame::STREAM | $ping);
            if ($ping !== 0) {
                $reply = $relay->receive();
                if ($reply === null) {
                    exit(0);
                }
                if (($reply->stream & Frame::STREAM_STOP) !== 0) {
                    fwrite(STDERR, "stream stopped by the server after chunk $i\n");
                    break;
                }
            }
            usleep(20000);
        }
        chunk($relay, '', 0);
        continue;
    }
    $hints = json_encode(['status' => 103, 'headers' => ['Link' => ['</style.css>; rel=preload; as=style']]]);
    $relay->send(Frame::pack(Frame::JSON, $hints, [strlen($hints)], Frame::STREAM));
    chunk($relay, "one\n", Frame::STREAM);
    chunk($relay, "two\n", Frame::STREAM | Frame::STREAM_PING);
    $pong = $relay->receive();
    if ($pong === null || ($pong->stream & Frame::STREAM_PONG) === 0) {
        fwrite(STDERR, "expected PONG\n");
        exit(1);
    }
    chunk($relay, "three\n", 0);
}
