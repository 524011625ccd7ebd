<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Codec;
use Ferry\Worker\Frame;
use Ferry\Worker\Tests\Support\WorkerProcess;
use Ferry\Worker\Tests\Support\Wire;
use PHPUnit\Framework\TestCase;

/** Round trips with the fixture workers of tests/php/, spawned with proc_open. */
final class FixtureTest extends TestCase
{
    /** @var list<WorkerProcess> */
    private array $procs = [];

    /** @param array<string, string> $env */
    private function start(string $fixture, array $env = []): WorkerProcess
    {
        $script = \str_starts_with($fixture, '/') ? $fixture : WorkerProcess::fixture($fixture);
        $proc = new WorkerProcess($script, $env);
        $this->procs[] = $proc;
        return $proc;
    }

    protected function tearDown(): void
    {
        foreach ($this->procs as $proc) {
            $proc->close();
        }
        $this->procs = [];
    }

    /**
     * Sends a request and returns [frame, context, body].
     *
     * @param array<string, mixed> $ctx
     * @return array{Frame, array<mixed>, string}
     */
    private static function roundTrip(WorkerProcess $w, array $ctx, string $body = '', int $codec = Frame::JSON): array
    {
        $w->send(Wire::request($ctx, $body, $codec));
        $frame = $w->receive();
        self::assertNotNull($frame, 'worker closed stdout; stderr: ' . $w->stderr());
        if (($frame->flags & Frame::ERROR) !== 0) {
            return [$frame, [], $frame->payload];
        }
        [$rctx, $rbody] = Wire::response($frame, $codec);
        return [$frame, $rctx, $rbody];
    }

    /** @return array<string, mixed> */
    private static function get(string $pathAndQuery, array $extra = []): array
    {
        $query = \parse_url('http://x' . $pathAndQuery, \PHP_URL_QUERY) ?? '';
        return ['method' => 'GET', 'uri' => 'http://localhost' . $pathAndQuery, 'rawQuery' => $query] + $extra;
    }

    /** @return array<string, array{int}> */
    public static function codecs(): array
    {
        return ['json' => [Frame::JSON], 'msgpack' => [Frame::MSGPACK]];
    }

    /** @dataProvider codecs */
    public function testEchoRoundTrip(int $codec): void
    {
        $w = $this->start('echo.php');
        $hello = $w->handshake();
        self::assertIsInt($hello['pid']);
        self::assertGreaterThan(0, $hello['pid']);
        self::assertSame(Codec::msgpackAvailable() ? 'msgpack' : null, $hello['codec'] ?? null);
        if ($codec === Frame::MSGPACK && !Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }

        $body = \random_bytes(3000);
        [$frame, $ctx, $rbody] = self::roundTrip($w, [], $body, $codec);
        self::assertSame($codec, $frame->flags);
        self::assertSame(200, $ctx['status']);
        self::assertSame(['application/json'], $ctx['headers']['Content-Type']);
        self::assertSame([(string) $hello['pid']], $ctx['headers']['X-Worker-Pid']);
        self::assertSame(['a=1', 'b=2'], $ctx['headers']['Set-Cookie']);
        $echo = \json_decode($rbody, true, 32, \JSON_THROW_ON_ERROR);
        self::assertSame('POST', $echo['method']);
        self::assertSame('http://example.test:8080/some/path?a=1&b[]=x&b[]=y', $echo['uri']);
        self::assertSame('a=1&b[]=x&b[]=y', $echo['rawQuery']);
        self::assertSame('HTTP/1.1', $echo['protocol']);
        self::assertSame(['text/html', 'application/json'], $echo['headers']['Accept']);
        self::assertSame(['session' => 'abc def', 'theme' => 'dark'], $echo['cookies']);
        self::assertSame('10.0.0.7', $echo['remoteAddr']);
        self::assertSame(3000, $echo['bodyLength']);
        self::assertSame(\md5($body), $echo['bodyMd5']);
        self::assertSame($hello['pid'], $echo['pid']);
        self::assertSame($codec === Frame::MSGPACK ? 'msgpack' : 'json', $echo['codec']);

        // Same process, more requests.
        [, $ctx, $rbody] = self::roundTrip($w, self::get('/big?n=200000'), '', $codec);
        self::assertSame(\str_repeat('x', 200000), $rbody);
        $payload = \random_bytes(300000);
        [, $ctx, $rbody] = self::roundTrip($w, self::get('/echo-body', ['method' => 'PUT']), $payload, $codec);
        self::assertSame($payload, $rbody);
        [, $ctx] = self::roundTrip($w, self::get('/status/503'), '', $codec);
        self::assertSame(503, $ctx['status']);
        [, $ctx] = self::roundTrip($w, self::get('/sleep?ms=20'), '', $codec);
        self::assertSame(200, $ctx['status']);

        $w->closeStdin();
        self::assertSame(0, $w->wait(), 'EOF on stdin is a clean exit');
    }

    public function testErrorFrameThenKeepsServing(): void
    {
        $w = $this->start('echo.php');
        $w->handshake();
        [$frame, , $message] = self::roundTrip($w, self::get('/error'));
        self::assertSame(Frame::ERROR, $frame->flags);
        self::assertSame([], $frame->options);
        self::assertSame('boom from echo.php', $message);
        [, $ctx] = self::roundTrip($w, self::get('/after'));
        self::assertSame(200, $ctx['status']);
        $w->send(Wire::stopFrame());
        self::assertSame(0, $w->wait());
        self::assertStringContainsString('RuntimeException: boom from echo.php in', $w->stderr());
    }

    public function testWhatTheHandlerPrintsGoesBeforeItsBody(): void
    {
        // as php-fpm sends it (issue 42); never as bytes of its own on the pipe
        $w = $this->start('echo.php');
        $w->handshake();
        [$frame, $ctx, $body] = self::roundTrip($w, self::get('/stdout'));
        self::assertSame(200, $ctx['status']);
        self::assertStringStartsWith("stray output from app\n{", $body);
        self::assertSame('/stdout', \json_decode(\substr($body, \strlen("stray output from app\n")), true)['path']);
        $w->closeStdin();
        self::assertSame('', $w->readStdoutToEnd(), 'nothing but frames on stdout');
        self::assertSame(0, $w->wait());
        self::assertStringNotContainsString('stray output from app', $w->stderr());
    }

    public function testGuardComesBackAfterTheAppClosesEveryBuffer(): void
    {
        $script = (string) \tempnam(\sys_get_temp_dir(), 'ferry-guard-') . '.php';
        \file_put_contents($script, '<?php require ' . \var_export(\dirname(__DIR__) . '/autoload.php', true) . ';
            $w = Ferry\Worker\Worker::create();
            while ($w->waitRequest()) {
                while (ob_get_level() > 0) { ob_end_clean(); }
                $w->respond(200, [], "ok");
                echo "after respond\n";
            }');
        try {
            $w = $this->start($script);
            $w->handshake();
            self::assertSame('ok', self::roundTrip($w, self::get('/'))[2]);
            self::assertSame('ok', self::roundTrip($w, self::get('/'))[2]);
            $w->closeStdin();
            self::assertSame('', $w->readStdoutToEnd());
            self::assertSame(0, $w->wait());
            self::assertSame(2, \substr_count($w->stderr(), "after respond\n"));
        } finally {
            \unlink($script);
        }
    }

    public function testExitMidRequest(): void
    {
        $w = $this->start('echo.php');
        $w->handshake();
        $w->send(Wire::request(self::get('/exit')));
        self::assertNull($w->receive());
        self::assertSame(3, $w->wait());
    }

    public function testRequestStopOnce(): void
    {
        $flag = \sys_get_temp_dir() . '/ferry-stop-once-' . \getmypid() . '-' . \mt_rand();
        $w = $this->start('echo.php', ['FERRY_TEST_STOP_ONCE' => $flag]);
        $w->handshake();
        $w->send(Wire::request(self::get('/stop')));
        $frame = $w->receive();
        self::assertNotNull($frame);
        $golden = Wire::hex('14 00 0d 00 00 00 f3 39 ef db 00 00 0d 00 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d');
        self::assertSame(\bin2hex($golden), \bin2hex($frame->encode()));
        self::assertSame(0, $w->wait(), 'the loop ends after requestStop()');
        self::assertFileExists($flag);

        // The second worker answers the same request normally.
        $w2 = $this->start('echo.php', ['FERRY_TEST_STOP_ONCE' => $flag]);
        $w2->handshake();
        [, $ctx] = self::roundTrip($w2, self::get('/stop'));
        self::assertSame(200, $ctx['status']);
        \unlink($flag);
    }

    public function testStopFrameExitsZero(): void
    {
        $w = $this->start('hello.php');
        $w->handshake();
        [$frame, $ctx, $body] = self::roundTrip($w, self::get('/'));
        self::assertSame('Hello, World!', $body);
        self::assertSame(['text/plain'], $ctx['headers']['Content-Type']);
        $w->send(Wire::stopFrame());
        self::assertSame(0, $w->wait());
    }

    public function testBootstrapFailures(): void
    {
        $fail = $this->start('boot_fail.php');
        self::assertSame(2, $fail->wait());
        self::assertStringContainsString('cannot boot', $fail->stderr());

        $syntax = $this->start('boot_syntax.php');
        self::assertSame(255, $syntax->wait());
        self::assertStringContainsString('Parse error', $syntax->stderr() . $syntax->readStdoutToEnd());

        $garbage = $this->start('hello.php');
        $garbage->send("GET / HTTP/1.1\r\n\r\n");
        self::assertSame(2, $garbage->wait(), 'garbage on stdin fails the bootstrap');
        self::assertStringContainsString('bootstrap failed', $garbage->stderr());

        $eof = $this->start('hello.php');
        $eof->closeStdin();
        self::assertSame(0, $eof->wait(), 'EOF before the handshake is a clean exit');
    }

    public function testStdoutGarbageBeforeTheLibrary(): void
    {
        $w = $this->start('stdout_garbage.php');
        $w->send(Wire::pidFrame());
        $w->closeStdin();
        $out = $w->readStdoutToEnd();
        self::assertStringStartsWith("hello from a stray echo\n", $out);
        $frames = Wire::frames(\substr($out, \strlen("hello from a stray echo\n")));
        self::assertSame(Frame::CONTROL, $frames[0]->flags);
        self::assertSame(0, $w->wait());
    }

    public function testPsr7Fixtures(): void
    {
        $hello = $this->start('psr7_hello.php');
        $hello->handshake();
        [, $ctx, $body] = self::roundTrip($hello, self::get('/'));
        self::assertSame([200, 'Hello, World!'], [$ctx['status'], $body]);

        $echo = $this->start('psr7_echo.php');
        $echo->handshake();
        [, $ctx, $body] = self::roundTrip($echo, self::get('/p?x=1', ['headers' => ['X-A' => ['1', '2']]]), 'raw');
        $data = \json_decode($body, true, 32, \JSON_THROW_ON_ERROR);
        self::assertSame('GET', $data['method']);
        self::assertSame('http://localhost/p?x=1', $data['uri']);
        self::assertSame(['1', '2'], $data['headers']['X-A']);
        self::assertSame(['x' => '1'], $data['query']);
        self::assertSame('raw', $data['body']);
        self::assertSame('/p?x=1', $data['requestUri']);
        self::assertSame(['a=1', 'b=2'], $ctx['headers']['Set-Cookie']);
    }

    public function testLeakGrowsMemory(): void
    {
        $w = $this->start('leak.php');
        $w->handshake();
        [, , $first] = self::roundTrip($w, self::get('/'));
        [, , $second] = self::roundTrip($w, self::get('/'));
        self::assertGreaterThanOrEqual((1 << 20) - 4096, (int) $second - (int) $first);
    }

    public function testSlowStopIgnoresStopAndSigterm(): void
    {
        $w = $this->start('slow_stop.php');
        $w->handshake();
        [, , $body] = self::roundTrip($w, self::get('/'));
        self::assertSame('slow stop', $body);
        $w->send(Wire::stopFrame());
        \usleep(200000);
        self::assertTrue($w->isRunning(), 'slow_stop.php exited on the stop frame');
        self::assertStringContainsString('told to stop', $w->stderr());
        if (\function_exists('pcntl_signal')) {
            $w->signal(15);
            \usleep(200000);
            self::assertTrue($w->isRunning(), 'slow_stop.php exited on SIGTERM');
        }
        $w->signal(9);
        self::assertSame(128 + 9, $w->wait());
    }
}
