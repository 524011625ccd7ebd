<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Codec;
use Ferry\Worker\Frame;
use Ferry\Worker\ProtocolException;
use Ferry\Worker\Request;
use Ferry\Worker\Response;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\StreamedResponse;
use Ferry\Worker\Tests\Support\CaptureFilter;
use Ferry\Worker\Tests\Support\Wire;
use Ferry\Worker\Worker;
use PHPUnit\Framework\TestCase;

final class WorkerTest extends TestCase
{
    /** @var resource */
    private $out;

    private function worker(string $input, ?bool $msgpack = false): Worker
    {
        $this->out = Wire::memory();
        return new Worker(new StreamRelay(Wire::memory($input), $this->out), $msgpack);
    }

    /** @return list<Frame> */
    private function sent(): array
    {
        return Wire::frames(Wire::drain($this->out));
    }

    /** @return list<int> */
    public static function codecs(): array
    {
        return ['json' => [Frame::JSON], 'msgpack' => [Frame::MSGPACK]];
    }

    public function testHandshakeWithoutMsgpack(): void
    {
        $worker = $this->worker(Wire::pidFrame(), false);
        self::assertFalse($worker->announcesMsgpack());
        $frames = $this->sent();
        self::assertCount(1, $frames);
        self::assertSame(Frame::CONTROL, $frames[0]->flags);
        self::assertSame([], $frames[0]->options);
        self::assertSame('{"pid":' . \getmypid() . '}', $frames[0]->payload);
        self::assertNull($worker->waitRequest(), 'EOF ends the loop');
    }

    public function testHandshakeWithMsgpack(): void
    {
        if (!Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }
        $this->worker(Wire::pidFrame(), null);
        $frames = $this->sent();
        self::assertSame(Frame::CONTROL, $frames[0]->flags);
        self::assertSame('{"pid":' . \getmypid() . ',"codec":"msgpack"}', $frames[0]->payload);
    }

    public function testHandshakeReplyIsTheGoldenShape(): void
    {
        // Same bytes as the golden "PID reply" except for the PID digits.
        $this->worker(Wire::pidFrame(), false);
        $bytes = Wire::drain($this->out);
        $expected = Frame::pack(0x01, '{"pid":' . \getmypid() . '}');
        self::assertSame(\bin2hex($expected), \bin2hex($bytes));
    }

    public function testGarbageInsteadOfPidFrameFailsTheBootstrap(): void
    {
        $this->expectException(ProtocolException::class);
        $this->worker("not a frame at all\n");
    }

    public function testNonControlFirstFrameFailsTheBootstrap(): void
    {
        $this->expectException(ProtocolException::class);
        $this->expectExceptionMessage('PID');
        $this->worker(Wire::request());
    }

    public function testStopFrameEndsTheLoop(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::stopFrame() . Wire::request());
        self::assertNull($worker->waitRequest());
        self::assertNull($worker->waitRequest());
        self::assertCount(1, $this->sent(), 'only the PID reply');
    }

    public function testStopFrameInsteadOfPid(): void
    {
        $worker = $this->worker(Wire::stopFrame() . Wire::request());
        self::assertNull($worker->waitRequest());
        self::assertSame('', Wire::drain($this->out));
    }

    public function testSecondPidFrameIsAnsweredAgain(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::pidFrame(99) . Wire::request());
        self::assertNotNull($worker->waitRequest());
        self::assertCount(2, $this->sent());
    }

    public function testEmptyRequestFrameMeansTerminate(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Frame::pack(Frame::JSON, '', [0]) . Wire::request());
        self::assertNull($worker->waitRequest());
    }

    /** @dataProvider codecs */
    public function testRequestDecoding(int $codec): void
    {
        if ($codec === Frame::MSGPACK && !Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }
        $body = "line1\nbinary\x00\xff";
        $worker = $this->worker(Wire::pidFrame() . Wire::request(['attributes' => ['route' => 'x']], $body, $codec));
        $req = $worker->waitRequest();
        self::assertInstanceOf(Request::class, $req);
        self::assertSame('POST', $req->method);
        self::assertSame('http://example.test:8080/some/path?a=1&b[]=x&b[]=y', $req->uri);
        self::assertSame('/some/path', $req->path);
        self::assertSame('a=1&b[]=x&b[]=y', $req->rawQuery);
        self::assertSame(['a' => '1', 'b' => ['x', 'y']], $req->query);
        self::assertSame('HTTP/1.1', $req->protocol);
        self::assertSame(['text/html', 'application/json'], $req->headers['Accept']);
        self::assertSame('text/plain', $req->header('content-type'));
        self::assertSame('text/html', $req->header('ACCEPT'));
        self::assertSame('', $req->header('X-Empty'));
        self::assertNull($req->header('X-Missing'));
        self::assertSame(['text/html', 'application/json'], $req->headerValues('accept'));
        self::assertSame(['session' => 'abc def', 'theme' => 'dark'], $req->cookies);
        self::assertSame($body, $req->body);
        self::assertSame('10.0.0.7', $req->remoteAddr);
        self::assertFalse($req->parsed);
        self::assertNull($req->form);
        self::assertNull($req->uploads);
        self::assertSame(['route' => 'x'], $req->attributes);
        self::assertSame($codec, $req->codec);
    }

    /** @dataProvider codecs */
    public function testEmptyMapsAndParsedForm(int $codec): void
    {
        if ($codec === Frame::MSGPACK && !Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }
        $form = Codec::encode($codec, ['a' => 'last', 'list' => ['1', '2'], 'n' => ['b' => ['c' => 'deep']], 'e' => new \stdClass()]);
        $uploads = ['file' => ['name' => 'a.txt', 'mime' => 'text/plain', 'size' => 3, 'error' => 0, 'tmpName' => '/tmp/x']];
        $frame = Wire::request([
            'headers' => new \stdClass(),
            'cookies' => new \stdClass(),
            'attributes' => new \stdClass(),
            'uri' => 'https://h.test',
            'rawQuery' => '',
            'parsed' => true,
            'uploads' => $uploads,
        ], $form, $codec);
        $req = $this->worker(Wire::pidFrame() . $frame)->waitRequest();
        self::assertNotNull($req);
        self::assertSame([], $req->headers);
        self::assertSame([], $req->cookies);
        self::assertSame([], $req->attributes);
        self::assertSame('/', $req->path);
        self::assertSame([], $req->query);
        self::assertTrue($req->parsed);
        self::assertSame(['a' => 'last', 'list' => ['1', '2'], 'n' => ['b' => ['c' => 'deep']], 'e' => []], $req->form);
        self::assertSame($uploads, $req->uploads);
    }

    /** @dataProvider codecs */
    public function testResponseEncodingUsesTheRequestCodec(int $codec): void
    {
        if ($codec === Frame::MSGPACK && !Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }
        $worker = $this->worker(Wire::pidFrame() . Wire::request([], '', $codec));
        self::assertNotNull($worker->waitRequest());
        $worker->respond(201, [
            'Content-Type' => 'text/plain',
            'Set-Cookie' => ['a=1', 'b=2'],
            'X-Number' => 42,
            'X-Long' => \str_repeat('v', 300),
        ], 'hello');
        $frames = $this->sent();
        self::assertCount(2, $frames);
        $resp = $frames[1];
        self::assertSame($codec, $resp->flags);
        self::assertCount(1, $resp->options);
        [$ctx, $body] = Wire::response($resp, $codec);
        self::assertSame('hello', $body);
        self::assertSame([
            'status' => 201,
            'headers' => [
                'Content-Type' => ['text/plain'],
                'Set-Cookie' => ['a=1', 'b=2'],
                'X-Number' => ['42'],
                'X-Long' => [\str_repeat('v', 300)],
            ],
        ], $ctx);
    }

    public function testJsonResponseBytes(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::request());
        $worker->waitRequest();
        $worker->respond(200, [], 'ok');
        $ctx = '{"status":200,"headers":{}}';
        self::assertSame(Frame::pack(Frame::JSON, $ctx . 'ok', [\strlen($ctx)]), $this->sent()[1]->encode());
    }

    public function testMsgpackResponseBytes(): void
    {
        if (!Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }
        $worker = $this->worker(Wire::pidFrame() . Wire::request([], '', Frame::MSGPACK));
        $worker->waitRequest();
        $worker->respond(404, ['A' => 'x']);
        $ctx = "\x82\xa6status\xcd\x01\x94\xa7headers\x81\xa1A\x91\xa1x";
        self::assertSame(\bin2hex(Frame::pack(Frame::MSGPACK, $ctx, [\strlen($ctx)])), \bin2hex($this->sent()[1]->encode()));
        self::assertSame(['status' => 404, 'headers' => ['A' => ['x']]], \msgpack_unpack($ctx));
        // An empty header map is a map, not an array; a numeric header name stays a string key.
        self::assertSame("\x82\xa6status\xcc\xc8\xa7headers\x80", Codec::encodeResponse(Frame::MSGPACK, 200, []));
        self::assertSame(
            "\x82\xa6status\xcc\xc8\xa7headers\x82\xa3123\x91\xa1x\xa1B\x92\xa0\xa1y",
            Codec::encodeResponse(Frame::MSGPACK, 200, ['123' => ['x'], 'B' => ['', 'y']]),
        );
        $long = \str_repeat('h', 70000);
        self::assertSame(
            ['status' => 599, 'headers' => ['7' => [$long, \str_repeat('s', 40)]]],
            \msgpack_unpack(Codec::encodeResponse(Frame::MSGPACK, 599, [7 => [$long, \str_repeat('s', 40)]])),
        );
    }

    public function testErrorFrameMatchesGolden(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::request());
        $worker->waitRequest();
        $worker->error('boom');
        self::assertSame(Wire::hex('13 40 04 00 00 00 88 1e 11 e3 00 00 62 6f 6f 6d'), $this->sent()[1]->encode());
    }

    public function testRequestStopMatchesGoldenAndEndsTheLoop(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::request() . Wire::request());
        self::assertNotNull($worker->waitRequest());
        $worker->requestStop();
        self::assertNull($worker->waitRequest());
        $golden = Wire::hex('14 00 0d 00 00 00 f3 39 ef db 00 00 0d 00 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d');
        self::assertSame(\bin2hex($golden), \bin2hex($this->sent()[1]->encode()));
        self::assertCount(2, $this->sent());
    }

    public function testRespondWithoutRequestIsALogicError(): void
    {
        $worker = $this->worker(Wire::pidFrame());
        $this->expectException(\LogicException::class);
        $worker->respond(200);
    }

    public function testWaitingAgainWithoutAnsweringIsALogicError(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::request() . Wire::request());
        $worker->waitRequest();
        $this->expectException(\LogicException::class);
        $worker->waitRequest();
    }

    public function testBadContextFailsOnlyThatRequest(): void
    {
        $bad = Frame::pack(Frame::JSON, '{nope' . 'body', [5]);
        $worker = $this->worker(Wire::pidFrame() . $bad . Wire::request(['method' => 'PUT']));
        $req = null;
        $log = $this->captureStderr(function () use ($worker, &$req): void {
            $req = $worker->waitRequest();
        });
        self::assertStringContainsString('bad request', $log);
        self::assertNotNull($req);
        self::assertSame('PUT', $req->method);
        $frames = $this->sent();
        self::assertSame(Frame::ERROR, $frames[1]->flags);
        self::assertStringContainsString('bad request context', $frames[1]->payload);
    }

    public function testRequestFrameWithoutOptionIsAProtocolError(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Frame::pack(Frame::JSON, '{}'));
        $this->expectException(ProtocolException::class);
        $worker->waitRequest();
    }

    public function testContextLengthBeyondPayloadIsAProtocolError(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Frame::pack(Frame::JSON, '{}', [3]));
        $this->expectException(ProtocolException::class);
        $worker->waitRequest();
    }

    public function testServeKeepsServingAfterAnException(): void
    {
        $input = Wire::pidFrame();
        foreach (['/one', '/throw', '/array', '/string', '/error-empty', '/stop', '/never'] as $path) {
            $input .= Wire::request(['uri' => 'http://h' . $path, 'rawQuery' => '']);
        }
        $worker = $this->worker($input);
        $seen = [];
        $stderr = $this->captureStderr(function () use ($worker, &$seen): void {
            $worker->serve(function (Request $r) use ($worker, &$seen): mixed {
                $seen[] = $r->path;
                return match ($r->path) {
                    '/one' => new Response(200, ['X' => 'y'], 'one'),
                    '/throw' => throw new \RuntimeException('kaboom'),
                    '/array' => [202, ['A' => ['b']], 'arr'],
                    '/string' => 'str',
                    '/error-empty' => throw new \LogicException(),
                    '/stop' => $worker->requestStop(),
                    default => 'unexpected',
                };
            });
        });
        self::assertSame(['/one', '/throw', '/array', '/string', '/error-empty', '/stop'], $seen);
        $frames = $this->sent();
        self::assertCount(7, $frames);
        self::assertSame('one', Wire::response($frames[1], Frame::JSON)[1]);
        self::assertSame(Frame::ERROR, $frames[2]->flags);
        self::assertSame('kaboom', $frames[2]->payload);
        self::assertSame([['status' => 202, 'headers' => ['A' => ['b']]], 'arr'], Wire::response($frames[3], Frame::JSON));
        self::assertSame([['status' => 200, 'headers' => []], 'str'], Wire::response($frames[4], Frame::JSON));
        self::assertSame(Frame::ERROR, $frames[5]->flags);
        self::assertSame('LogicException', $frames[5]->payload);
        self::assertSame('{"stop":true}', $frames[6]->payload);
        self::assertSame([13], $frames[6]->options);
        self::assertStringContainsString('RuntimeException: kaboom in ' . __FILE__, $stderr);
    }

    public function testServeRejectsABadHandlerResult(): void
    {
        $worker = $this->worker(Wire::pidFrame() . Wire::request() . Wire::request());
        $calls = 0;
        $this->captureStderr(function () use ($worker, &$calls): void {
            $worker->serve(function () use (&$calls): mixed {
                return ++$calls === 1 ? 42 : [200, ['H' => new \stdClass()], ''];
            });
        });
        $frames = $this->sent();
        self::assertSame(Frame::ERROR, $frames[1]->flags);
        self::assertStringContainsString('must return', $frames[1]->payload);
        self::assertSame(Frame::ERROR, $frames[2]->flags);
        self::assertStringContainsString('header values must be strings', $frames[2]->payload);
    }

    /** @dataProvider codecs */
    public function testStreamSendsChunksWithAPingOnEveryFifth(int $codec): void
    {
        $pong = Frame::pack(0, '', [], Frame::STREAM_PONG);
        $w = $this->worker(Wire::pidFrame() . Wire::request([], '', $codec) . $pong);
        $w->waitRequest();
        $w->earlyHints(['Link' => '</a.css>; rel=preload']);
        $this->assertTrue($w->stream(201, ['X-A' => 'b'], ['1', '2', '3', '4', '5', '6']));
        $frames = \array_slice($this->sent(), 1); // after the handshake reply
        $this->assertCount(8, $frames); // 103, six chunks, the final frame
        $hints = Codec::decode($codec, \substr($frames[0]->payload, 0, $frames[0]->options[0]));
        $this->assertSame(103, $hints['status']);
        $this->assertSame(Frame::STREAM, $frames[0]->stream);
        $bodies = [];
        foreach (\array_slice($frames, 1) as $i => $f) {
            $ctx = Codec::decode($codec, \substr($f->payload, 0, $f->options[0]));
            $this->assertSame(201, $ctx['status']);
            $this->assertSame($codec, $f->flags);
            $bodies[] = \substr($f->payload, $f->options[0]);
            $last = $i === 6;
            $this->assertSame($last ? 0 : Frame::STREAM | ($i === 4 ? Frame::STREAM_PING : 0), $f->stream, "frame $i");
        }
        $this->assertSame(['1', '2', '3', '4', '5', '6', ''], $bodies);
    }

    public function testAStopStopsTheGeneratorAndEndsTheStream(): void
    {
        $stop = Frame::pack(0, '', [], Frame::STREAM_STOP);
        $w = $this->worker(Wire::pidFrame() . Wire::request() . $stop . Wire::request());
        $w->waitRequest();
        $produced = 0;
        $chunks = (static function () use (&$produced): \Generator {
            for ($i = 0; $i < 100; ++$i) {
                ++$produced;
                yield "c$i";
            }
        })();
        $this->assertFalse($w->stream(200, [], $chunks));
        $this->assertSame(5, $produced, 'nothing is produced after the STOP');
        $frames = \array_slice($this->sent(), 1);
        $this->assertSame(0, \end($frames)->stream, 'a final frame ends the stream');
        $this->assertNotNull($w->waitRequest(), 'the worker serves the next request');
    }

    public function testServeStreamsAStreamedResponseAndSseIsFormatted(): void
    {
        $w = $this->worker(Wire::pidFrame() . Wire::request());
        $w->serve(static fn (Request $r) => StreamedResponse::sse([
            'plain',
            ['event' => 'tick', 'id' => "7\n", 'retry' => 1000, 'data' => "a\nb"],
        ]));
        $frames = \array_slice($this->sent(), 1);
        $body = '';
        foreach ($frames as $f) {
            $body .= \substr($f->payload, $f->options[0]);
        }
        $this->assertSame("data: plain\n\nevent: tick\nid: 7\nretry: 1000\ndata: a\ndata: b\n\n", $body);
        $ctx = Codec::decode(Frame::JSON, \substr($frames[0]->payload, 0, $frames[0]->options[0]));
        $this->assertSame(['text/event-stream'], $ctx['headers']['Content-Type']);
    }

    public function testReferenceCyclesARequestLeftAreCollectedBeforeTheNextRequest(): void
    {
        $w = $this->worker(Wire::pidFrame() . Wire::request() . Wire::request());
        self::assertNotNull($w->waitRequest());
        $w->respond(200);
        $before = \memory_get_usage();
        for ($i = 0; $i < 100; ++$i) { // 4 MB in 100 cycles: refcounting frees none, PHP's collector waits
            $node = new \stdClass();    // for 10,000 roots
            $node->self = $node;
            $node->data = \str_repeat('x', 40_000);
        }
        unset($node);
        self::assertGreaterThan($before + (3 << 20), \memory_get_usage());
        self::assertNotNull($w->waitRequest());
        self::assertLessThan($before + (1 << 20), \memory_get_usage(), 'the cycles were collected');
        $w->respond(200);
    }

    private function captureStderr(callable $fn): string
    {
        return CaptureFilter::stderr($fn);
    }
}
