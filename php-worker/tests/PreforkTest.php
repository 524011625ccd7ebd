<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Frame;
use PHPUnit\Framework\TestCase;

/**
 * prefork.php, the PHP-level fork template's entry (docs/protocol.md §8.1), in a real PHP process started as the
 * server starts it (`php -d auto_prepend_file=prefork.php script.php`): what it answers to the PID handshake and
 * how it refuses what it cannot do. The forks themselves are tested against the server (tests/e2e/test_fork.py,
 * PhpLevelTemplateTest).
 */
final class PreforkTest extends TestCase
{
    private const PREFORK = __DIR__ . '/../prefork.php';
    private const SCRIPT = __DIR__ . '/../../tests/php/rr_worker.php';

    /**
     * Starts php with prefork.php prepended to $args, writes $input on its stdin and closes it. fd 3 is a unix
     * socket when $socket (the process is killed once it answered), else a plain file. Returns [exit code,
     * stdout, stderr].
     *
     * @param list<string> $args
     * @return array{int, string, string}
     */
    private function start(string $input, array $args = [self::SCRIPT], bool $socket = false): array
    {
        $fd3 = $socket ? \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP) : null;
        $spec = [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w'], 3 => $fd3 !== null ? $fd3[1] : ['file', '/dev/null', 'r']];
        $cmd = \array_merge([\PHP_BINARY, '-d', 'auto_prepend_file=' . self::PREFORK], $args);
        $proc = \proc_open($cmd, $spec, $pipes);
        self::assertIsResource($proc);
        if ($fd3 !== null) {
            \fclose($fd3[1]);
        }
        \fwrite($pipes[0], $input);
        \fclose($pipes[0]);
        $out = '';
        if ($fd3 !== null) {
            // A template waits for commands on the socket, whose other end it inherited too (PHP's sockets are
            // not close-on-exec; the server's are): read its answer, then end it.
            $out = (string) \fread($pipes[1], Frame::HEADER_SIZE);
            if (\strlen($out) === Frame::HEADER_SIZE) {
                $out .= (string) \fread($pipes[1], Frame::parseHeader($out)['length']);
            }
            \proc_terminate($proc, 9);
            \fclose($fd3[0]);
        }
        $out .= (string) \stream_get_contents($pipes[1]);
        $err = (string) \stream_get_contents($pipes[2]);
        \fclose($pipes[1]);
        \fclose($pipes[2]);
        return [\proc_close($proc), $out, $err];
    }

    /** @return array<string, mixed> the JSON of the one control frame in $out */
    private static function reply(string $out): array
    {
        $frame = Frame::decode($out);
        self::assertTrue($frame->hasFlag(Frame::CONTROL));
        return \json_decode($frame->payload, true, 16, \JSON_THROW_ON_ERROR);
    }

    public function testItAnswersAsATemplate(): void
    {
        [, $out, $err] = $this->start(Frame::pack(Frame::CONTROL, '{"pid":' . \getmypid() . ',"template":true}'), [self::SCRIPT], true);
        self::assertSame('', $err);
        $reply = self::reply($out);
        self::assertTrue($reply['template']);
        self::assertIsInt($reply['pid']);
        self::assertArrayNotHasKey('codec', $reply, 'the template has no context codec: each fork negotiates its own');
    }

    public function testWithoutTheControlSocketItSaysWhyItCannotBeATemplate(): void
    {
        [$code, $out, $err] = $this->start(Frame::pack(Frame::CONTROL, '{"pid":' . \getmypid() . ',"template":true}'));
        self::assertSame(0, $code, $err);
        $reply = self::reply($out);
        self::assertFalse($reply['template']);
        self::assertStringContainsString('fd 3 is not the server\'s control socket', $reply['why']);
    }

    public function testAHandshakeThatDoesNotAskForATemplateIsRefused(): void
    {
        [$code, $out, $err] = $this->start(Frame::pack(Frame::CONTROL, '{"pid":1}'));
        self::assertSame(2, $code);
        self::assertSame('', $out);
        self::assertStringContainsString('prefork.php runs only as the fork template of a Ferry server', $err);
    }

    public function testGarbageAndAClosedStdinAreClearErrors(): void
    {
        [$code, $out, $err] = $this->start("GET / HTTP/1.1\r\n\r\n");
        self::assertSame([2, ''], [$code, $out]);
        self::assertStringContainsString('the handshake is not a frame', $err);
        [$code, , $err] = $this->start('');
        self::assertSame(2, $code);
        self::assertStringContainsString('stdin closed during the handshake', $err);
    }
}
