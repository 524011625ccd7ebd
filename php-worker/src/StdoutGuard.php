<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * Keeps stdout for frames only: anything the application echoes (or prints through the output layer)
 * goes to stderr, which the server logs. Frames are written to the STDOUT stream resource, which does
 * not pass through output buffers.
 */
final class StdoutGuard
{
    /** @var resource|null */
    private static $stderr = null;
    private static bool $installed = false;
    /** Called when PHP's shutdown ends the guard (ForkTemplate::serverStopped()). */
    private static ?\Closure $atEnd = null;

    /** Starts the guard buffer unless it is already the outermost output buffer. */
    public static function install(): void
    {
        self::$installed = true;
        if (self::active()) {
            return;
        }
        // Levels above ours would be flushed into ours later; keep whatever is there now.
        \ob_start([self::class, 'handle'], 1);
        $display = \strtolower((string) \ini_get('display_errors'));
        if (!\in_array($display, ['', '0', 'off', 'no', 'false', 'stderr'], true)) {
            \ini_set('display_errors', 'stderr');
        }
    }

    /** Reinstalls an installed guard when the application closed every output buffer (cheap check). */
    public static function rearm(): void
    {
        if (self::$installed && \ob_get_level() === 0) {
            \ob_start([self::class, 'handle'], 1);
        }
    }

    /**
     * Calls $end when PHP's request shutdown ends this buffer: the last output buffer to end, after the
     * shutdown functions and the destructors. Not when the application ends it (a destructor calling
     * ob_end_flush()): there the call stack holds the caller.
     */
    public static function exitAtEnd(\Closure $end): void
    {
        self::$atEnd = $end;
    }

    public static function active(): bool
    {
        if (\ob_get_level() === 0) {
            return false;
        }
        $status = \ob_get_status(true);
        return ($status[0]['name'] ?? '') === self::class . '::handle';
    }

    /** Output handler: forwards the buffer to stderr and lets nothing through to stdout. */
    public static function handle(string $buffer, int $phase = 0): string
    {
        if ($buffer !== '') {
            self::$stderr ??= \defined('STDERR') ? \STDERR : \fopen('php://stderr', 'wb');
            if (\is_resource(self::$stderr)) {
                \fwrite(self::$stderr, $buffer);
            }
        }
        if (self::$atEnd !== null && ($phase & \PHP_OUTPUT_HANDLER_FINAL) !== 0
            && \count(\debug_backtrace(\DEBUG_BACKTRACE_IGNORE_ARGS, 2)) <= 1) {
            (self::$atEnd)();
        }
        return '';
    }
}
