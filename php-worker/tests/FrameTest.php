<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Frame;
use Ferry\Worker\ProtocolException;
use Ferry\Worker\Tests\Support\Wire;
use PHPUnit\Framework\TestCase;

final class FrameTest extends TestCase
{
    /** docs/protocol.md §5, byte for byte. */
    public static function goldenFrames(): array
    {
        return [
            'PID request' => ['13 09 0c 00 00 00 5f 0c 46 73 00 00 7b 22 70 69 64 22 3a 31 32 33 34 7d', 0x09, '{"pid":1234}', [], 0],
            'PID reply' => ['13 01 0c 00 00 00 9e 47 36 43 00 00 7b 22 70 69 64 22 3a 35 36 37 38 7d', 0x01, '{"pid":5678}', [], 0],
            'Stop' => ['13 09 0d 00 00 00 3a 6b fa cb 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d', 0x09, '{"stop":true}', [], 0],
            'Error' => ['13 40 04 00 00 00 88 1e 11 e3 00 00 62 6f 6f 6d', 0x40, 'boom', [], 0],
            'Stop request' => ['14 00 0d 00 00 00 f3 39 ef db 00 00 0d 00 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d', 0, '{"stop":true}', [13], 0],
            'Stream STOP' => ['13 00 00 00 00 00 96 d1 80 34 02 00', 0, '', [], 0x02],
            'PONG' => ['13 00 00 00 00 00 96 d1 80 34 08 00', 0, '', [], 0x08],
        ];
    }

    /**
     * @dataProvider goldenFrames
     * @param list<int> $options
     */
    public function testEncodeMatchesGoldenFrame(string $hex, int $flags, string $payload, array $options, int $stream): void
    {
        $golden = Wire::hex($hex);
        self::assertSame(\bin2hex($golden), \bin2hex((new Frame($flags, $payload, $options, $stream))->encode()));
        self::assertSame(\bin2hex($golden), \bin2hex(Frame::pack($flags, $payload, $options, $stream)));
    }

    /**
     * @dataProvider goldenFrames
     * @param list<int> $options
     */
    public function testDecodeGoldenFrame(string $hex, int $flags, string $payload, array $options, int $stream): void
    {
        $frame = Frame::decode(Wire::hex($hex));
        self::assertSame($flags, $frame->flags);
        self::assertSame($payload, $frame->payload);
        self::assertSame($options, $frame->options);
        self::assertSame($stream, $frame->stream);
    }

    public function testHeaderLengthNibbleCountsOptions(): void
    {
        self::assertSame(0x15, \ord(Frame::pack(0, 'x', [1, 2])[0]));
        self::assertSame(0x1d, \ord(Frame::pack(0, '', \range(1, 10))[0]));
        $frame = Frame::decode(Frame::pack(Frame::JSON, 'abcdef', [3, 0xffffffff]));
        self::assertSame([3, 0xffffffff], $frame->options);
        self::assertSame('abcdef', $frame->payload);
    }

    public function testMoreThanTenOptionsIsRefused(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        new Frame(0, '', \range(1, 11));
    }

    public function testDecodeRejectsBadCrc(): void
    {
        $bytes = Wire::hex('13 40 04 00 00 00 88 1e 11 e3 00 00 62 6f 6f 6d');
        $bytes[6] = "\x89";
        $this->expectException(ProtocolException::class);
        $this->expectExceptionMessage('CRC');
        Frame::decode($bytes);
    }

    public function testDecodeRejectsTamperedLength(): void
    {
        $bytes = Wire::hex('13 40 04 00 00 00 88 1e 11 e3 00 00 62 6f 6f 6d');
        $bytes[2] = "\x05"; // the CRC covers the length
        $this->expectException(ProtocolException::class);
        $this->expectExceptionMessage('CRC');
        Frame::decode($bytes . 'x');
    }

    public function testDecodeRejectsWrongVersionAndStrayText(): void
    {
        try {
            Frame::decode("hello from a stray echo\n");
            self::fail('stray text decoded as a frame');
        } catch (ProtocolException $e) {
            self::assertStringContainsString('68656c6c6f', $e->getMessage(), 'the bytes that arrived are reported');
        }
        $this->expectException(ProtocolException::class);
        Frame::decode("\x23" . \substr(Frame::pack(0, ''), 1));
    }

    public function testDecodeRejectsSizeMismatch(): void
    {
        $this->expectException(ProtocolException::class);
        Frame::decode(Frame::pack(0, 'abc') . 'extra');
    }
}
