<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Frame;
use Ferry\Worker\ProtocolException;
use Ferry\Worker\Rpc;
use Ferry\Worker\StreamRelay;
use PHPUnit\Framework\TestCase;

/** docs/protocol.md §9: the websockets.* RPC calls a worker makes (Rpc), against a fake RPC server. */
final class WebSocketRpcTest extends TestCase
{
    /** @var resource|null the fake RPC server of rpcExchange() */
    private $proc = null;
    private string $stderrFile = '';

    protected function tearDown(): void
    {
        if (\is_resource($this->proc)) {
            $status = \proc_get_status($this->proc);
            if ($status['running']) {
                \proc_terminate($this->proc, 9);
            }
            \proc_close($this->proc);
        }
        $this->proc = null;
        if ($this->stderrFile !== '') {
            @\unlink($this->stderrFile);
            $this->stderrFile = '';
        }
    }

    // ---------------------------------------------------------------- Rpc websockets.*

    /**
     * Starts a fake RPC listener (a php -r child: Rpc::call writes then blocks reading, so the server must be
     * another process), runs $calls against it and returns what it received, one record per call: flags,
     * options, method, raw JSON argument. It answers "true", or an ERROR frame when the argument's code is 1005.
     *
     * With $dropAfterFirst it closes the connection after its first answer, as the server closes an idle one
     * to make room, and serves the rest on the next connection.
     *
     * @param callable(Rpc): void $calls
     * @return list<array{flags: int, options: list<int>, method: string, arg: string}>
     */
    private function rpcExchange(callable $calls, bool $dropAfterFirst = false): array
    {
        $autoload = \dirname(__DIR__) . '/autoload.php';
        $code = 'require ' . \var_export($autoload, true) . ';' . '$drop = ' . \var_export($dropAfterFirst, true) . ';' . <<<'PHP'
            use Ferry\Worker\Frame;
            use Ferry\Worker\StreamRelay;
            $srv = stream_socket_server('tcp://127.0.0.1:0', $errno, $err);
            if ($srv === false) { fwrite(STDERR, "listen: $err\n"); exit(1); }
            fwrite(STDOUT, stream_socket_get_name($srv, false) . "\n");
            $conn = @stream_socket_accept($srv, 10);
            if ($conn === false) { fwrite(STDERR, "no client\n"); exit(1); }
            $relay = new StreamRelay($conn, $conn, 10.0);
            $answered = 0;
            while (true) {
                if ($drop && $answered === 1) { // closed while idle, as to make room: the client comes back
                    $drop = false;
                    fclose($conn);
                    $conn = @stream_socket_accept($srv, 10);
                    if ($conn === false) { fwrite(STDERR, "no second connection\n"); exit(1); }
                    $relay = new StreamRelay($conn, $conn, 10.0);
                }
                if (($f = $relay->receive()) === null) { break; }
                $answered++;
                $mlen = $f->options[1] ?? 0;
                $method = substr($f->payload, 0, $mlen);
                $arg = (string) substr($f->payload, $mlen);
                fwrite(STDOUT, json_encode(['flags' => $f->flags, 'options' => $f->options, 'method' => $method,
                    'arg' => base64_encode($arg)]) . "\n");
                $decoded = json_decode($arg, true);
                if (is_array($decoded) && ($decoded['code'] ?? null) === 1005) {
                    $relay->send(Frame::pack($f->flags | Frame::ERROR, $method . '"code" is not a close code a server may send', $f->options));
                } else {
                    $relay->send(Frame::pack($f->flags, $method . 'true', $f->options));
                }
            }
            PHP;
        $this->stderrFile = (string) \tempnam(\sys_get_temp_dir(), 'ferry-rpc-');
        $proc = \proc_open([\PHP_BINARY, '-r', $code], [1 => ['pipe', 'w'], 2 => ['file', $this->stderrFile, 'w']], $pipes);
        self::assertIsResource($proc);
        $this->proc = $proc;
        $stdout = $pipes[1];
        $address = \trim(self::readLine($stdout, 10.0));
        self::assertMatchesRegularExpression('/^127\.0\.0\.1:\d+$/', $address, 'fake server stderr: ' . \file_get_contents($this->stderrFile));

        $rpc = new Rpc('tcp://' . $address, 5.0);
        try {
            $calls($rpc);
        } finally {
            $rpc->close(); // EOF: the fake server ends
        }
        $records = [];
        while (($line = self::readLine($stdout, 10.0)) !== '') {
            $r = \json_decode($line, true, 8, \JSON_THROW_ON_ERROR);
            $r['arg'] = (string) \base64_decode($r['arg'], true);
            $records[] = $r;
        }
        \fclose($stdout);
        // proc_get_status() gives the real exit code only once, on the call that sees the end.
        $deadline = \microtime(true) + 10;
        while (($status = \proc_get_status($proc))['running'] && \microtime(true) < $deadline) {
            \usleep(5000);
        }
        self::assertFalse($status['running'], 'the fake server ended');
        self::assertSame(0, $status['exitcode'], 'fake server stderr: ' . \file_get_contents($this->stderrFile));
        return $records;
    }

    /** @param resource $stream a line, or '' at EOF; fails after $timeout seconds */
    private static function readLine($stream, float $timeout): string
    {
        $r = [$stream];
        $w = $e = null;
        $n = \stream_select($r, $w, $e, (int) $timeout, (int) (($timeout - (int) $timeout) * 1e6));
        self::assertIsInt($n);
        self::assertGreaterThan(0, $n, 'timed out waiting for the fake RPC server');
        $line = \fgets($stream);
        return $line === false ? '' : $line;
    }

    /**
     * @param array{flags: int, options: list<int>, method: string, arg: string} $record
     */
    private static function assertCall(array $record, int $seq, string $method, string $json): void
    {
        self::assertSame(Frame::JSON, $record['flags'], 'JSON codec flag');
        self::assertSame([$seq, \strlen($method)], $record['options'], 'options = [sequence, method length]');
        self::assertSame($method, $record['method']);
        // Same keys in the same order, same types (json_encode's default escaping of "/" aside).
        self::assertSame(
            \json_decode($json, true, 16, \JSON_THROW_ON_ERROR),
            \json_decode($record['arg'], true, 16, \JSON_THROW_ON_ERROR),
            $record['arg'],
        );
    }

    public function testRpcPublishText(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->publish('chat', 'hello');
            $rpc->publish([4 => 'a', 9 => 'b'], 'héllo "/"');
            $rpc->publish('t', '');
        });
        self::assertCount(3, $records);
        self::assertCall($records[0], 1, 'websockets.Publish', '{"topics":["chat"],"message":"hello"}');
        self::assertSame('{"topics":["chat"],"message":"hello"}', $records[0]['arg'], 'the exact bytes');
        self::assertCall($records[1], 2, 'websockets.Publish', '{"topics":["a","b"],"message":"héllo \\"/\\""}');
        self::assertSame(['topics' => ['a', 'b'], 'message' => 'héllo "/"'], \json_decode($records[1]['arg'], true));
        self::assertCall($records[2], 3, 'websockets.Publish', '{"topics":["t"],"message":""}');
    }

    public function testRpcPublishBinaryAndInvalidUtf8GoBase64(): void
    {
        $bytes = "\x00\xff\xfe\x01";
        $records = $this->rpcExchange(static function (Rpc $rpc) use ($bytes): void {
            $rpc->publish(['a', 'b'], $bytes, binary: true);
            $rpc->publish('t', 'valid text', binary: true);
        });
        self::assertCount(2, $records);
        self::assertCall($records[0], 1, 'websockets.Publish', '{"topics":["a","b"],"base64":"AP/+AQ==","binary":true}');
        self::assertSame($bytes, \base64_decode(\json_decode($records[0]['arg'], true)['base64'], true));
        self::assertCall($records[1], 2, 'websockets.Publish',
            '{"topics":["t"],"base64":"' . \base64_encode('valid text') . '","binary":true}');
    }

    public function testRpcRefusesTextThatIsNotUtf8BeforeSendingIt(): void
    {
        $rpc = new Rpc('tcp://127.0.0.1:1'); // never reached: the check comes first
        foreach ([static fn () => $rpc->publish('t', "bad \xc3\x28 utf-8"), static fn () => $rpc->send('1.1', "\xff")] as $call) {
            try {
                $call();
                self::fail('invalid UTF-8 text was accepted');
            } catch (\InvalidArgumentException $e) {
                self::assertStringContainsString('valid UTF-8', $e->getMessage());
            }
        }
    }

    public function testRpcSend(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->send('1.42', 'hi');
            $rpc->send(['1.1', '2.7'], "\x80\x81", binary: true);
            $rpc->send([3 => '4.4'], "\xff", binary: true);
        });
        self::assertCount(3, $records);
        self::assertCall($records[0], 1, 'websockets.Send', '{"to":["1.42"],"message":"hi"}');
        self::assertCall($records[1], 2, 'websockets.Send', '{"to":["1.1","2.7"],"base64":"gIE=","binary":true}');
        self::assertCall($records[2], 3, 'websockets.Send', '{"to":["4.4"],"base64":"/w==","binary":true}');
    }

    public function testRpcCloseConnections(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->closeConnections('1.42');
            $rpc->closeConnections(['1.1', '2.7'], 4000, 'kicked');
            $rpc->closeConnections([5 => '3.3'], 1001, 'server restart');
        });
        self::assertCount(3, $records);
        self::assertCall($records[0], 1, 'websockets.Close', '{"to":["1.42"],"code":1000,"reason":""}');
        self::assertCall($records[1], 2, 'websockets.Close', '{"to":["1.1","2.7"],"code":4000,"reason":"kicked"}');
        self::assertCall($records[2], 3, 'websockets.Close', '{"to":["3.3"],"code":1001,"reason":"server restart"}');
    }

    public function testRpcErrorAnswerBecomesAProtocolExceptionAndTheConnectionStays(): void
    {
        $caught = null;
        $records = $this->rpcExchange(static function (Rpc $rpc) use (&$caught): void {
            try {
                $rpc->closeConnections('1.1', 1005);
            } catch (ProtocolException $e) {
                $caught = $e->getMessage();
            }
            $rpc->publish('after', 'ok'); // same connection, next sequence number
        });
        self::assertSame('websockets.Close: "code" is not a close code a server may send', $caught);
        self::assertCount(2, $records);
        self::assertCall($records[0], 1, 'websockets.Close', '{"to":["1.1"],"code":1005,"reason":""}');
        self::assertCall($records[1], 2, 'websockets.Publish', '{"topics":["after"],"message":"ok"}');
    }

    public function testRpcCallsAgainOnANewConnectionWhenTheKeptOneWasClosedWhileIdle(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->publish('first', 'a');
            \usleep(200000); // the server closes the idle connection meanwhile
            $rpc->publish('second', 'b'); // the kept connection is gone: made again on a new one
        }, dropAfterFirst: true);
        self::assertCount(2, $records, 'the second call reached the server once');
        self::assertCall($records[0], 1, 'websockets.Publish', '{"topics":["first"],"message":"a"}');
        self::assertCall($records[1], 3, 'websockets.Publish', '{"topics":["second"],"message":"b"}');
    }
}
