<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * Context encodings: JSON (flag 0x08) and msgpack (flag 0x10, needs ext-msgpack).
 *
 * Maps always go out as maps (an empty PHP array would otherwise become a JSON/msgpack array),
 * and ext-msgpack's stdClass for an empty map comes back as an empty array.
 */
final class Codec
{
    private const JSON_OUT = \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE
        | \JSON_INVALID_UTF8_SUBSTITUTE | \JSON_THROW_ON_ERROR;

    public static function msgpackAvailable(): bool
    {
        return \function_exists('msgpack_pack') && \function_exists('msgpack_unpack');
    }

    /** The codec flag of a frame: MSGPACK when set, JSON otherwise. */
    public static function fromFlags(int $flags): int
    {
        return ($flags & Frame::MSGPACK) !== 0 ? Frame::MSGPACK : Frame::JSON;
    }

    /**
     * Decodes a context map; an empty string is an empty map.
     *
     * @return array<mixed>
     * @throws ProtocolException
     */
    public static function decode(int $codec, string $bytes): array
    {
        if ($bytes === '') {
            return [];
        }
        if ($codec === Frame::MSGPACK) {
            if (!self::msgpackAvailable()) {
                throw new ProtocolException('received a msgpack context but ext-msgpack is not loaded');
            }
            $value = @\msgpack_unpack($bytes);
            if ($value instanceof \stdClass) {
                $value = (array) $value;
            }
            if (!\is_array($value)) {
                throw new ProtocolException('context is not a msgpack map', $bytes);
            }
            return $value;
        }
        try {
            $value = \json_decode($bytes, true, 512, \JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            throw new ProtocolException('context is not valid JSON: ' . $e->getMessage(), $bytes, $e);
        }
        if (!\is_array($value)) {
            throw new ProtocolException('context is not a JSON object', $bytes);
        }
        return $value;
    }

    /**
     * Encodes a response context {"status": int, "headers": {name: [values]}}.
     *
     * @param array<string, list<string>> $headers
     */
    public static function encodeResponse(int $codec, int $status, array $headers): string
    {
        if ($codec === Frame::MSGPACK) {
            // ext-msgpack packs a non-empty string-keyed array as a map, a list as an array; an empty
            // array would be an array and a numeric header name an integer key, so pack those by hand.
            $byHand = $headers === [];
            foreach ($headers as $name => $_) {
                if (!\is_string($name)) {
                    $byHand = true;
                    break;
                }
            }
            if (!$byHand) {
                return \msgpack_pack(['status' => $status, 'headers' => $headers]);
            }
            return "\x82\xa6status" . self::packInt($status) . "\xa7headers" . self::packHeaders($headers);
        }
        return \json_encode(
            ['status' => $status, 'headers' => $headers === [] ? new \stdClass() : $headers],
            self::JSON_OUT,
        );
    }

    /**
     * Encodes an arbitrary value (a tree of arrays and scalars) for tests and tools.
     */
    public static function encode(int $codec, mixed $value): string
    {
        if ($codec === Frame::MSGPACK) {
            return \msgpack_pack($value);
        }
        return \json_encode($value, self::JSON_OUT);
    }

    /**
     * Replaces the stdClass objects ext-msgpack gives for empty maps with arrays, at any depth.
     */
    public static function normalize(mixed $value): mixed
    {
        if ($value instanceof \stdClass) {
            $value = (array) $value;
        }
        if (\is_array($value)) {
            foreach ($value as $k => $v) {
                if (\is_array($v) || $v instanceof \stdClass) {
                    $value[$k] = self::normalize($v);
                }
            }
        }
        return $value;
    }

    /** @param array<string, list<string>> $headers */
    private static function packHeaders(array $headers): string
    {
        $out = self::packLength(\count($headers), 0x80, "\xde", "\xdf");
        foreach ($headers as $name => $values) {
            $out .= self::packString((string) $name) . self::packLength(\count($values), 0x90, "\xdc", "\xdd");
            foreach ($values as $value) {
                $out .= self::packString((string) $value);
            }
        }
        return $out;
    }

    private static function packLength(int $n, int $fix, string $tag16, string $tag32): string
    {
        if ($n < 16) {
            return \chr($fix | $n);
        }
        return $n <= 0xffff ? $tag16 . \pack('n', $n) : $tag32 . \pack('N', $n);
    }

    private static function packString(string $s): string
    {
        $n = \strlen($s);
        if ($n < 32) {
            return \chr(0xa0 | $n) . $s;
        }
        if ($n <= 0xff) {
            return "\xd9" . \chr($n) . $s;
        }
        return ($n <= 0xffff ? "\xda" . \pack('n', $n) : "\xdb" . \pack('N', $n)) . $s;
    }

    private static function packInt(int $i): string
    {
        if ($i >= 0 && $i < 128) {
            return \chr($i);
        }
        if ($i >= 0 && $i <= 0xffff) {
            return $i <= 0xff ? "\xcc" . \chr($i) : "\xcd" . \pack('n', $i);
        }
        return "\xd3" . \pack('J', $i);
    }
}
