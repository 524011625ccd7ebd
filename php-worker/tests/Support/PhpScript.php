<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests\Support;

/** Runs PHP source as a script in its own process (proc_open), for what a test must not do in PHPUnit's. */
final class PhpScript
{
    /**
     * [exit code, stdout, stderr] of `php [$phpArgs] <script with $source>`, with $env added to this process's
     * environment. Its output is read to the end, so it must not fill both pipes at once (a few kB).
     *
     * @param list<string> $phpArgs
     * @param array<string, string> $env
     * @return array{int, string, string}
     */
    public static function run(string $source, array $phpArgs = [], array $env = []): array
    {
        $script = (string) \tempnam(\sys_get_temp_dir(), 'ferry-script-');
        try {
            \file_put_contents($script, $source);
            $proc = \proc_open(
                [\PHP_BINARY, ...$phpArgs, $script],
                [1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
                $pipes,
                null,
                $env + \getenv(),
            );
            if (!\is_resource($proc)) {
                throw new \RuntimeException('proc_open failed for ' . \PHP_BINARY);
            }
            $out = (string) \stream_get_contents($pipes[1]);
            $err = (string) \stream_get_contents($pipes[2]);
            return [\proc_close($proc), $out, $err];
        } finally {
            @\unlink($script);
        }
    }
}
