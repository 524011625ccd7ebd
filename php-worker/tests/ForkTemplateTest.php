<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use PHPUnit\Framework\TestCase;

/**
 * ForkTemplate::forkToParent() in a real PHP process (proc_open): one fork whose child has the caller's parent
 * as its parent (clone with CLONE_PARENT), as a fork template makes a worker the server's child without a
 * middle process; FERRY_FORK_ONCE=0 turns it off (the template then forks twice).
 */
final class ForkTemplateTest extends TestCase
{
    /**
     * Runs the scenario: this script's process P stands in for the server, a child S of it for the template,
     * and S calls forkToParent(). Returns [exit code, stdout, stderr].
     *
     * @param array<string, string> $env
     * @return array{int, string, string}
     */
    private static function runScenario(array $env = []): array
    {
        $autoload = \var_export(\dirname(__DIR__) . '/autoload.php', true);
        $script = (string) \tempnam(\sys_get_temp_dir(), 'ferry-fork-once-');
        \file_put_contents($script, <<<PHP
            <?php
            require $autoload;
            \$s = pcntl_fork();
            if (\$s === 0) {
                \$w = Ferry\Worker\ForkTemplate::forkToParent();
                if (\$w === 0) {
                    fwrite(STDOUT, 'child ' . posix_getpid() . ' parent ' . posix_getppid() . "\\n");
                    posix_kill(posix_getpid(), SIGKILL); // no PHP shutdown in a copy of this script
                }
                fwrite(STDOUT, 'template got ' . var_export(\$w, true) . "\\n");
                posix_kill(posix_getpid(), SIGKILL);
            }
            pcntl_waitpid(\$s, \$st); // the template stand-in
            \$reaped = [];
            while ((\$pid = pcntl_waitpid(-1, \$st)) > 0) {
                \$reaped[] = \$pid;
            }
            echo 'server ', getmypid(), ' reaped ', implode(',', \$reaped), "\\n";
            PHP);
        $proc = \proc_open([\PHP_BINARY, $script], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null,
            \array_merge(\getenv(), $env));
        self::assertIsResource($proc);
        $out = (string) \stream_get_contents($pipes[1]);
        $err = (string) \stream_get_contents($pipes[2]);
        $code = \proc_close($proc);
        \unlink($script);
        return [$code, $out, $err];
    }

    public function testTheChildIsTheCallersParentsChild(): void
    {
        if (!\in_array(\php_uname('m'), ['x86_64', 'amd64', 'aarch64', 'arm64'], true)) {
            self::markTestSkipped('clone(2) number not known here: forkToParent() returns null (two forks)');
        }
        [$code, $out, $err] = self::runScenario();
        self::assertSame(0, $code, $out . $err);
        self::assertSame('', $err);
        self::assertMatchesRegularExpression('/^template got (\d+)$/m', $out);
        \preg_match('/^template got (\d+)$/m', $out, $t);
        \preg_match('/^server (\d+) reaped (.*)$/m', $out, $s);
        $child = (int) $t[1];
        self::assertGreaterThan(0, $child);
        // The new process's parent is the server (the caller's parent), which reaps it: no middle process.
        self::assertStringContainsString("child $child parent {$s[1]}\n", $out);
        self::assertSame((string) $child, $s[2], 'after the template stand-in, the server reaps the child');
    }

    public function testFerryForkOnceZeroTurnsItOff(): void
    {
        [$code, $out, $err] = self::runScenario(['FERRY_FORK_ONCE' => '0']);
        self::assertSame(0, $code, $out . $err);
        self::assertStringContainsString("template got NULL\n", $out);
        self::assertStringNotContainsString('child ', $out);
        self::assertMatchesRegularExpression('/^server \d+ reaped $/m', $out, 'nothing after the stand-in');
    }
}
