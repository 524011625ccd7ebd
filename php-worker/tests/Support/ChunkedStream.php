<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests\Support;

/**
 * A stream wrapper that hands out data in small pieces (1, 2, 3, … bytes per read, cycling) and
 * accepts a few bytes per write: it exercises the short reads and writes of pipes. PHP's fread()
 * returns after one short stream_read(); its fwrite() loops until a stream_write() returns 0, so a
 * 0 in the pattern makes fwrite() itself return a partial count.
 *
 *     $in = ChunkedStream::open($bytes, [1, 5, 2]);   // reads of 1, 5, 2, 1, 5, 2, … bytes
 *     $out = ChunkedStream::open('', [3, 0]);         // fwrite() accepts 3 bytes per call
 *     ChunkedStream::contents($out);
 */
final class ChunkedStream
{
    private const SCHEME = 'ferry-chunked';

    /** @var array<string, array{data: string, pos: int, pattern: list<int>, calls: int, ...}> */
    private static array $streams = [];
    private static int $next = 0;

    /** @var resource|null set by PHP */
    public $context;

    private string $id = '';

    /**
     * @param list<int> $pattern sizes of successive reads/writes, cycling
     * @return resource
     */
    public static function open(string $data, array $pattern = [1, 2, 3]): mixed
    {
        if (!\in_array(self::SCHEME, \stream_get_wrappers(), true)) {
            \stream_wrapper_register(self::SCHEME, self::class);
        }
        $id = (string) ++self::$next;
        self::$streams[$id] = [
            'data' => $data, 'pos' => 0, 'pattern' => $pattern, 'calls' => 0, 'reads' => 0, 'writes' => 0,
        ];
        $stream = \fopen(self::SCHEME . '://' . $id, 'r+b');
        if ($stream === false) {
            throw new \RuntimeException('cannot open chunked stream');
        }
        return $stream;
    }

    /** @param resource $stream */
    public static function contents($stream): string
    {
        return self::$streams[self::idOf($stream)]['data'];
    }

    /**
     * Number of stream_read/stream_write calls that returned fewer bytes than PHP asked for.
     *
     * @param resource $stream
     * @return array{reads: int, writes: int}
     */
    public static function shortCalls($stream): array
    {
        $s = self::$streams[self::idOf($stream)];
        return ['reads' => $s['reads'], 'writes' => $s['writes']];
    }

    /** @param resource $stream */
    private static function idOf($stream): string
    {
        $meta = \stream_get_meta_data($stream);
        return \substr((string) $meta['uri'], \strlen(self::SCHEME) + 3);
    }

    public function stream_open(string $path, string $mode, int $options, ?string &$openedPath): bool
    {
        $this->id = \substr($path, \strlen(self::SCHEME) + 3);
        return isset(self::$streams[$this->id]);
    }

    public function stream_read(int $count): string
    {
        $s = &self::$streams[$this->id];
        $n = \min($count, \max(1, $this->step($s)), \strlen($s['data']) - $s['pos']);
        if ($n < $count) {
            $s['reads']++;
        }
        $chunk = (string) \substr($s['data'], $s['pos'], $n);
        $s['pos'] += $n;
        return $chunk;
    }

    public function stream_write(string $data): int
    {
        $s = &self::$streams[$this->id];
        $n = \min(\strlen($data), $this->step($s));
        if ($n < \strlen($data)) {
            $s['writes']++;
        }
        $s['data'] .= \substr($data, 0, $n);
        return $n;
    }

    public function stream_eof(): bool
    {
        $s = self::$streams[$this->id];
        return $s['pos'] >= \strlen($s['data']);
    }

    /** @return array<int|string, int> */
    public function stream_stat(): array
    {
        return ['size' => \strlen(self::$streams[$this->id]['data'])];
    }

    /** @param array{pattern: list<int>, calls: int} $s */
    private function step(array &$s): int
    {
        $size = $s['pattern'][$s['calls'] % \count($s['pattern'])];
        $s['calls']++;
        return $size;
    }
}
