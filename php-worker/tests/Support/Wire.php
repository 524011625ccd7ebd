<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests\Support;

use Ferry\Worker\Codec;
use Ferry\Worker\Frame;

/** Builds server-side frames and takes worker output apart. */
final class Wire
{
    public static function pidFrame(int $pid = 1234): string
    {
        return Frame::pack(Frame::CONTROL | Frame::JSON, '{"pid":' . $pid . '}');
    }

    public static function stopFrame(): string
    {
        return Frame::pack(Frame::CONTROL | Frame::JSON, '{"stop":true}');
    }

    /**
     * A request frame as the server sends it: one option = context length, flags = codec.
     *
     * @param array<string, mixed> $overrides context keys to replace
     */
    public static function request(array $overrides = [], string $body = '', int $codec = Frame::JSON): string
    {
        $ctx = Codec::encode($codec, self::context($overrides));
        return Frame::pack($codec, $ctx . $body, [\strlen($ctx)]);
    }

    /**
     * @param array<string, mixed> $overrides
     * @return array<string, mixed>
     */
    public static function context(array $overrides = []): array
    {
        return \array_replace([
            'remoteAddr' => '10.0.0.7',
            'protocol' => 'HTTP/1.1',
            'method' => 'POST',
            'uri' => 'http://example.test:8080/some/path?a=1&b[]=x&b[]=y',
            'headers' => [
                'Content-Type' => ['text/plain'],
                'Accept' => ['text/html', 'application/json'],
                'X-Empty' => [''],
            ],
            'cookies' => ['session' => 'abc def', 'theme' => 'dark'],
            'rawQuery' => 'a=1&b[]=x&b[]=y',
            'parsed' => false,
            'uploads' => null,
            'attributes' => [],
        ], $overrides);
    }

    /** @return resource a php://memory stream holding $bytes, positioned at the start */
    public static function memory(string $bytes = '')
    {
        $s = \fopen('php://memory', 'w+b');
        \fwrite($s, $bytes);
        \rewind($s);
        return $s;
    }

    /**
     * Splits a byte string into frames (must be whole frames only).
     *
     * @return list<Frame>
     */
    public static function frames(string $bytes): array
    {
        $frames = [];
        $pos = 0;
        while ($pos < \strlen($bytes)) {
            $h = Frame::parseHeader(\substr($bytes, $pos, Frame::HEADER_SIZE));
            $size = Frame::HEADER_SIZE + 4 * $h['options'] + $h['length'];
            $frames[] = Frame::decode(\substr($bytes, $pos, $size));
            $pos += $size;
        }
        return $frames;
    }

    /** @param resource $stream */
    public static function drain($stream): string
    {
        \rewind($stream);
        return (string) \stream_get_contents($stream);
    }

    /**
     * Splits a response frame into [context array, body], decoding the context with $codec.
     *
     * @return array{array<mixed>, string}
     */
    public static function response(Frame $frame, int $codec): array
    {
        $len = $frame->options[0];
        $ctx = Codec::normalize(Codec::decode($codec, \substr($frame->payload, 0, $len)));
        return [$ctx, \substr($frame->payload, $len)];
    }

    public static function hex(string $spaced): string
    {
        return (string) \hex2bin(\str_replace(' ', '', $spaced));
    }
}
