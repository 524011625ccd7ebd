<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Tests\Support\PhpScript;
use PHPUnit\Framework\TestCase;

/**
 * StdoutGuard in a real PHP process (proc_open): echoed output goes to stderr, and exitAtEnd()'s callback runs
 * when PHP's own shutdown ends the guard (after the shutdown functions and the destructors) but not when the
 * application ends it (the fork template's fast exit relies on both).
 */
final class StdoutGuardTest extends TestCase
{
    /**
     * Runs a script that installs the guard: [exit code, stdout, stderr].
     *
     * @return array{int, string, string}
     */
    private static function runScript(bool $destructorEndsBuffers, bool $atEnd = true): array
    {
        $autoload = \var_export(\dirname(__DIR__) . '/autoload.php', true);
        $endOb = \var_export($destructorEndsBuffers, true);
        $setAtEnd = $atEnd
            ? 'Ferry\Worker\StdoutGuard::exitAtEnd(static function (): void { fwrite(STDERR, "at-end\n"); exit(7); });'
            : '';
        return PhpScript::run(<<<PHP
            <?php
            require $autoload;
            final class D
            {
                public function __construct(private string \$name, private bool \$endOb) {}
                public function __destruct()
                {
                    if (\$this->endOb) {
                        while (ob_get_level() > 0) {
                            ob_end_flush();
                        }
                    }
                    fwrite(STDERR, "destruct {\$this->name}\n");
                }
            }
            Ferry\Worker\StdoutGuard::install();
            \$a = new D('a', false);
            \$b = new D('b', $endOb); // destroyed first: PHP ends the globals in reverse order
            register_shutdown_function(static function (): void { fwrite(STDERR, "shutdown\n"); });
            $setAtEnd
            echo "echoed\n";
            ob_start();
            echo "left in a buffer\n";
            PHP, ['-n']);
    }

    public function testCallbackRunsLastWhenShutdownEndsTheGuard(): void
    {
        [$code, $out, $err] = self::runScript(false);
        self::assertSame('', $out, 'nothing reaches stdout');
        self::assertSame("echoed\nshutdown\ndestruct b\ndestruct a\nleft in a buffer\nat-end\n", $err);
        self::assertSame(7, $code, 'the callback ended the process');
    }

    public function testCallbackDoesNotRunWhenTheApplicationEndsTheGuard(): void
    {
        [$code, $out, $err] = self::runScript(true);
        self::assertSame('', $out);
        self::assertSame("echoed\nshutdown\nleft in a buffer\ndestruct b\ndestruct a\n", $err);
        self::assertSame(0, $code, 'the process ended on its own');
    }

    public function testWithoutCallbackTheProcessEndsAsUsual(): void
    {
        [$code, $out, $err] = self::runScript(false, false);
        self::assertSame('', $out);
        self::assertSame("echoed\nshutdown\ndestruct b\ndestruct a\nleft in a buffer\n", $err);
        self::assertSame(0, $code);
    }
}
