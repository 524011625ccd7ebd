<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests\Support;

/** Stream filter that diverts what is written to STDERR into a buffer while a callable runs. */
final class CaptureFilter extends \php_user_filter
{
    private const NAME = 'ferry.capture';

    public static function stderr(callable $fn): string
    {
        if (!\in_array(self::NAME, \stream_get_filters(), true)) {
            \stream_filter_register(self::NAME, self::class);
        }
        $sink = \fopen('php://memory', 'w+b');
        $filter = \stream_filter_append(\STDERR, self::NAME, \STREAM_FILTER_WRITE, ['sink' => $sink]);
        try {
            $fn();
        } finally {
            \stream_filter_remove($filter);
        }
        \rewind($sink);
        return (string) \stream_get_contents($sink);
    }

    /**
     * @param resource $in
     * @param resource $out
     */
    public function filter($in, $out, &$consumed, bool $closing): int
    {
        while ($bucket = \stream_bucket_make_writeable($in)) {
            \fwrite($this->params['sink'], $bucket->data);
            $consumed += $bucket->datalen;
        }
        return \PSFS_PASS_ON;
    }
}
