<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * One Goridge v3 frame: 12-byte header, up to 10 option words, payload.
 *
 * Header layout (little-endian): [0] 0x10 | (3 + options), [1] flags, [2..5] payload length,
 * [6..9] CRC-32 of bytes 0..5, [10] stream byte, [11] reserved (0).
 */
final class Frame
{
    public const HEADER_SIZE = 12;
    public const MAX_OPTIONS = 10;

    public const CONTROL = 0x01;
    public const RAW = 0x04;
    public const JSON = 0x08;
    public const MSGPACK = 0x10;
    public const GOB = 0x20;
    public const ERROR = 0x40;
    public const PROTO = 0x80;

    public const STREAM = 0x01;
    public const STREAM_STOP = 0x02;
    public const STREAM_PING = 0x04;
    public const STREAM_PONG = 0x08;

    /**
     * @param list<int> $options
     */
    public function __construct(
        public readonly int $flags,
        public readonly string $payload = '',
        public readonly array $options = [],
        public readonly int $stream = 0,
    ) {
        if (\count($options) > self::MAX_OPTIONS) {
            throw new \InvalidArgumentException('a frame carries at most 10 option words');
        }
        if ($flags < 0 || $flags > 0xff || $stream < 0 || $stream > 0xff) {
            throw new \InvalidArgumentException('flags and stream byte must fit in one byte');
        }
    }

    /** The frame as bytes, ready for one write(). */
    public function encode(): string
    {
        return self::pack($this->flags, $this->payload, $this->options, $this->stream);
    }

    /**
     * Encodes without building a Frame object (hot path).
     *
     * @param list<int> $options
     */
    public static function pack(int $flags, string $payload, array $options = [], int $stream = 0): string
    {
        $head = \pack('CCV', 0x10 | (3 + \count($options)), $flags, \strlen($payload));
        $head .= \pack('VCC', \crc32($head), $stream, 0);
        foreach ($options as $option) {
            $head .= \pack('V', $option);
        }
        return $head . $payload;
    }

    /**
     * Parses and verifies a 12-byte header.
     *
     * @return array{flags: int, length: int, options: int, stream: int} options = number of option words
     * @throws ProtocolException
     */
    public static function parseHeader(string $header): array
    {
        if (\strlen($header) !== self::HEADER_SIZE) {
            throw new ProtocolException('frame header must be 12 bytes, got ' . \strlen($header), $header);
        }
        /** @var array{v: int, f: int, len: int, crc: int, s: int} $h */
        $h = \unpack('Cv/Cf/Vlen/Vcrc/Cs', $header);
        if (($h['v'] >> 4) !== 1) {
            throw new ProtocolException(\sprintf('not a Goridge v1 frame (first byte 0x%02x)', $h['v']), $header);
        }
        $words = $h['v'] & 0x0f;
        if ($words < 3 || $words > 3 + self::MAX_OPTIONS) {
            throw new ProtocolException(\sprintf('bad header length %d words', $words), $header);
        }
        if (\crc32(\substr($header, 0, 6)) !== $h['crc']) {
            throw new ProtocolException('frame header CRC mismatch', $header);
        }
        return ['flags' => $h['f'], 'length' => $h['len'], 'options' => $words - 3, 'stream' => $h['s']];
    }

    /**
     * Decodes one complete frame from a string (header, options, payload; nothing after it).
     *
     * @throws ProtocolException
     */
    public static function decode(string $bytes): self
    {
        $h = self::parseHeader(\substr($bytes, 0, self::HEADER_SIZE));
        $optBytes = 4 * $h['options'];
        $expected = self::HEADER_SIZE + $optBytes + $h['length'];
        if (\strlen($bytes) !== $expected) {
            throw new ProtocolException(
                \sprintf('frame size mismatch: header says %d bytes, got %d', $expected, \strlen($bytes)),
                \substr($bytes, 0, 64),
            );
        }
        return new self(
            $h['flags'],
            \substr($bytes, self::HEADER_SIZE + $optBytes),
            self::unpackOptions(\substr($bytes, self::HEADER_SIZE, $optBytes)),
            $h['stream'],
        );
    }

    /** @return list<int> */
    public static function unpackOptions(string $bytes): array
    {
        return $bytes === '' ? [] : \array_values(\unpack('V*', $bytes));
    }

    public function hasFlag(int $flag): bool
    {
        return ($this->flags & $flag) === $flag;
    }
}
