<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Frame;
use Ferry\Worker\ProtocolException;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\Tests\Support\ChunkedStream;
use Ferry\Worker\Tests\Support\Wire;
use PHPUnit\Framework\TestCase;

final class StreamRelayTest extends TestCase
{
    public function testReadsFramesSplitAcrossShortReads(): void
    {
        $big = \random_bytes(70000);
        $bytes = Wire::pidFrame() . Frame::pack(Frame::JSON, 'ctx' . $big, [3]) . Frame::pack(0, '', [], 0x08);
        foreach ([[1], [1, 2, 3], [5, 11, 7], [13], [4096, 1]] as $pattern) {
            $in = ChunkedStream::open($bytes, $pattern);
            $relay = new StreamRelay($in, Wire::memory());
            $a = $relay->receive();
            $b = $relay->receive();
            $c = $relay->receive();
            self::assertNotNull($a);
            self::assertSame('{"pid":1234}', $a->payload);
            self::assertNotNull($b);
            self::assertSame([3], $b->options);
            self::assertSame('ctx' . $big, $b->payload);
            self::assertNotNull($c);
            self::assertSame(0x08, $c->stream);
            self::assertNull($relay->receive(), 'EOF at a frame boundary');
            self::assertGreaterThan(0, ChunkedStream::shortCalls($in)['reads'], 'reads were short');
        }
    }

    public function testEveryByteBoundaryOfAFrame(): void
    {
        $frame = Frame::pack(Frame::MSGPACK, "\x80body", [1]);
        for ($cut = 1; $cut < \strlen($frame); $cut++) {
            $in = ChunkedStream::open($frame, [$cut, \strlen($frame)]);
            $got = (new StreamRelay($in, Wire::memory()))->receive();
            self::assertNotNull($got);
            self::assertSame("\x80body", $got->payload, "split at byte $cut");
        }
    }

    public function testShortWritesAreCompleted(): void
    {
        $out = ChunkedStream::open('', [3, 0, 1, 0]);
        $relay = new StreamRelay(Wire::memory(), $out);
        $frame = Frame::pack(Frame::JSON, \str_repeat('y', 100), [10]);
        $relay->send($frame);
        self::assertSame($frame, ChunkedStream::contents($out));
        self::assertGreaterThan(10, ChunkedStream::shortCalls($out)['writes']);
    }

    public function testMemoryAndTempStreams(): void
    {
        foreach (['php://memory', 'php://temp/maxmemory:64'] as $uri) {
            $in = \fopen($uri, 'w+b');
            \fwrite($in, Wire::stopFrame() . Frame::pack(Frame::JSON, \str_repeat('z', 1000), [0]));
            \rewind($in);
            $out = \fopen($uri, 'w+b');
            $relay = new StreamRelay($in, $out);
            self::assertSame('{"stop":true}', $relay->receive()?->payload);
            self::assertSame(1000, \strlen((string) $relay->receive()?->payload));
            self::assertNull($relay->receive());
            $relay->send(Frame::pack(Frame::ERROR, 'boom'));
            self::assertSame('13400400000088', \substr(\bin2hex(Wire::drain($out)), 0, 14));
        }
    }

    public function testPipeDeliveringAFrameInPieces(): void
    {
        $frame = Frame::pack(Frame::JSON, \str_repeat('q', 5000), [100]);
        $code = '$f = hex2bin($argv[1]); foreach ([7, 10, 2000] as $n) { fwrite(STDOUT, substr($f, 0, $n)); '
            . 'fflush(STDOUT); $f = substr($f, $n); usleep(30000); } fwrite(STDOUT, $f);';
        $proc = \proc_open([\PHP_BINARY, '-r', $code, \bin2hex($frame)], [1 => ['pipe', 'w']], $pipes);
        self::assertIsResource($proc);
        $relay = new StreamRelay($pipes[1], Wire::memory(), 5.0);
        $got = $relay->receive();
        self::assertNull($relay->receive());
        \fclose($pipes[1]);
        \proc_close($proc);
        self::assertNotNull($got);
        self::assertSame([100], $got->options);
        self::assertSame(\str_repeat('q', 5000), $got->payload);
    }

    public function testEofInsideAFrameIsAnError(): void
    {
        $frame = Frame::pack(Frame::JSON, 'abcdef', [2]);
        foreach ([5, 12, 15, \strlen($frame) - 1] as $len) {
            $relay = new StreamRelay(Wire::memory(\substr($frame, 0, $len)), Wire::memory());
            try {
                $relay->receive();
                self::fail("truncated frame ($len bytes) accepted");
            } catch (ProtocolException $e) {
                self::assertStringContainsString('ended in the middle', $e->getMessage());
            }
        }
    }

    public function testBadCrcOnTheWireIsRejected(): void
    {
        $frame = Wire::pidFrame();
        $frame[9] = \chr(\ord($frame[9]) ^ 0xff);
        $this->expectException(ProtocolException::class);
        (new StreamRelay(Wire::memory($frame), Wire::memory()))->receive();
    }

    public function testTimeout(): void
    {
        [$a, $b] = \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP);
        $relay = new StreamRelay($b, $b, 0.05);
        $this->expectException(ProtocolException::class);
        $this->expectExceptionMessage('timed out');
        $relay->receive();
    }
}
