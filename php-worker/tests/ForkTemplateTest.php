<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Tests\Support\PhpScript;
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
     * and S calls forkToParent() with P's pid (or, !$serverIsParent, another). Returns [exit code, stdout,
     * stderr].
     *
     * @param array<string, string> $env
     * @return array{int, string, string}
     */
    private static function runScenario(array $env = [], bool $serverIsParent = true): array
    {
        $autoload = \var_export(\dirname(__DIR__) . '/autoload.php', true);
        $server = $serverIsParent ? 'posix_getppid()' : '1'; // 1: a server that is not the stand-in's parent
        return PhpScript::run(<<<PHP
            <?php
            require $autoload;
            \$s = pcntl_fork();
            if (\$s === 0) {
                \$w = Ferry\Worker\ForkTemplate::forkToParent($server);
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
            PHP, [], $env);
    }

    private static function skipWhereCloneIsNotKnown(): void
    {
        if (!\in_array(\php_uname('m'), ['x86_64', 'amd64', 'aarch64', 'arm64'], true)) {
            self::markTestSkipped('clone(2) number not known here: forkToParent() returns null (two forks)');
        }
    }

    public function testTheChildIsTheCallersParentsChild(): void
    {
        self::skipWhereCloneIsNotKnown();
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

    public function testABadFerryForkOnceValueIsSaidAndIgnored(): void
    {
        self::skipWhereCloneIsNotKnown();
        [$code, $out, $err] = self::runScenario(['FERRY_FORK_ONCE' => "off\n"]);
        self::assertSame(0, $code, $out . $err);
        self::assertSame("ferry template: FERRY_FORK_ONCE must be 0 or 1 (got 'off\\n'); forking once where it can\n", $err);
        self::assertMatchesRegularExpression('/^template got [1-9]\d*$/m', $out, 'still one fork');
    }

    public function testNotWhenTheServerIsNotTheParent(): void
    {
        // A template run through a shell that forks it: its parent is the shell, and a CLONE_PARENT child would
        // be the shell's, not the server's. Two forks instead (the server, a subreaper, adopts the worker).
        [$code, $out, $err] = self::runScenario([], false);
        self::assertSame(0, $code, $out . $err);
        self::assertStringContainsString("template got NULL\n", $out);
        self::assertStringNotContainsString('child ', $out);
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
