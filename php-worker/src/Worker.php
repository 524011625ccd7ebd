<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * The worker side of the Ferry/RoadRunner pipe protocol: handshake, request loop, responses.
 *
 *     $worker = Worker::create();
 *     while ($req = $worker->waitRequest()) {
 *         $worker->respond(200, ['Content-Type' => 'text/plain'], 'hello');
 *     }
 */
final class Worker
{
    /** Garbage a worker lets build up between two collections of reference cycles (tidyMemory()). */
    private const GARBAGE_BYTES = 1 << 20;

    private const STOP_PAYLOAD = '{"stop":true}';

    private bool $msgpack;
    private bool $pending = false;
    private bool $stopped = false;
    private int $codec = Frame::JSON;
    private bool $exitOnFailure = false;
    /** The server asked this process to be its fork template (its pid), until the first waitRequest(). */
    private ?int $templateFor = null;
    /** What the heap holds between requests once garbage is collected (null before the first request). */
    private ?int $liveHeap = null;

    /**
     * @param bool|null $msgpack   announce msgpack in the handshake (null: when ext-msgpack is loaded)
     * @param bool      $handshake answer the server's PID frame now (the server waits for it)
     * @throws ProtocolException when the handshake fails
     */
    public function __construct(private readonly Relay $relay, ?bool $msgpack = null, bool $handshake = true)
    {
        $this->msgpack = $msgpack ?? Codec::msgpackAvailable();
        if ($this->msgpack && !Codec::msgpackAvailable()) {
            throw new \InvalidArgumentException('msgpack requested but ext-msgpack is not loaded');
        }
        if ($handshake) {
            $this->handshake();
        }
    }

    /**
     * The worker of this process: guards stdout, talks over STDIN/STDOUT, does the handshake.
     * A bootstrap failure (unreadable stdin, garbage instead of the PID frame) exits with code 2;
     * later protocol failures also exit 2; EOF on stdin ends the loop (exit 0).
     */
    public static function create(?Relay $relay = null): self
    {
        StdoutGuard::install();
        try {
            $worker = new self($relay ?? StreamRelay::stdio());
        } catch (ProtocolException $e) {
            self::log('ferry worker: bootstrap failed: ' . $e->getMessage());
            exit(2);
        }
        $worker->exitOnFailure = true;
        return $worker;
    }

    /** True when this worker announced msgpack (the server may then send msgpack contexts). */
    public function announcesMsgpack(): bool
    {
        return $this->msgpack;
    }

    /**
     * The next request, or null when the loop must end (stop frame, EOF, requestStop()).
     *
     * @throws ProtocolException (only when not created by create(), which exits 2 instead)
     */
    public function waitRequest(): ?Request
    {
        if ($this->pending) {
            throw new \LogicException('answer the current request (respond(), error(), requestStop()) first');
        }
        StdoutGuard::rearm();
        $this->tidyMemory();
        if ($this->templateFor !== null) {
            // Everything the script did before its first waitRequest() is shared by the workers forked here.
            $server = $this->templateFor;
            $this->templateFor = null;
            ForkTemplate::serve($server); // returns in a new worker, on its own pipes
            $this->handshake();
        }
        while (!$this->stopped) {
            $frame = $this->receive();
            if ($frame === null) {
                $this->stopped = true;
                break;
            }
            if (($frame->flags & Frame::CONTROL) !== 0) {
                $this->control($frame);
                continue;
            }
            if ($frame->payload === '') {
                // Empty context and body: RoadRunner's "terminate".
                $this->stopped = true;
                break;
            }
            if (\count($frame->options) !== 1 || $frame->options[0] > \strlen($frame->payload)) {
                $this->fail(new ProtocolException(\sprintf(
                    'request frame needs one option word <= payload length (options: [%s], payload %d bytes)',
                    \implode(', ', $frame->options),
                    \strlen($frame->payload),
                )));
            }
            $codec = Codec::fromFlags($frame->flags);
            $ctxLen = $frame->options[0];
            $this->codec = $codec;
            $this->pending = true;
            try {
                $ctx = Codec::decode($codec, \substr($frame->payload, 0, $ctxLen));
                return Request::fromContext($ctx, (string) \substr($frame->payload, $ctxLen), $codec);
            } catch (ProtocolException $e) {
                // The frame itself was sound: fail this request, keep the worker.
                self::log('ferry worker: bad request: ' . $e->getMessage());
                $this->error('bad request context: ' . $e->getMessage());
            }
        }
        return null;
    }

    /**
     * Answers the current request.
     *
     * @param array<string, string|int|list<string|int>> $headers name => value or list of values
     */
    public function respond(int $status, array $headers = [], string $body = ''): void
    {
        if (!$this->pending) {
            throw new \LogicException('respond(): no request is waiting for an answer');
        }
        $frame = $this->responseFrame($status, $headers, $body);
        $this->pending = false;
        $this->send($frame);
    }

    /**
     * Sends 103 Early Hints for the current request (e.g. Link: preload headers); the final answer follows.
     *
     * @param array<string, string|int|list<string|int>> $headers
     */
    public function earlyHints(array $headers): void
    {
        if (!$this->pending) {
            throw new \LogicException('earlyHints(): no request is waiting for an answer');
        }
        [$ctx] = $this->context(103, $headers);
        $this->send(Frame::pack($this->codec, $ctx, [\strlen($ctx)], Frame::STREAM));
    }

    /**
     * Answers the current request with a body sent as it is produced: each chunk goes out in its own frame
     * (STREAM set on all but the last), every 5th with PING, as RoadRunner's packages do, answered by the
     * server's PONG — or by STOP when the client went away: then the rest is not produced and false returned.
     *
     * @param array<string, string|int|list<string|int>> $headers
     * @param iterable<string>                           $chunks
     */
    public function stream(int $status, array $headers, iterable $chunks): bool
    {
        $stream = $this->openStream($status, $headers);
        foreach ($chunks as $chunk) {
            if (!$stream->write($chunk)) {
                break;
            }
        }
        return $stream->close();
    }

    /**
     * Answers the current request with a body written piece by piece (ResponseStream::write(), then
     * close()): the push form of stream(), for code that produces its body by printing it.
     *
     * @param array<string, string|int|list<string|int>> $headers
     */
    public function openStream(int $status, array $headers): ResponseStream
    {
        if (!$this->pending) {
            throw new \LogicException('openStream(): no request is waiting for an answer');
        }
        [$ctx, $len] = $this->context($status, $headers);
        return new ResponseStream($this, $ctx, $len);
    }

    /**
     * @internal ResponseStream's: one chunk; with $ping, waits for the server's answer.
     * @return int 0 sent, 1 the server asked to stop (the client left), 2 the server is gone
     */
    public function sendStreamFrame(string $ctx, int $len, string $chunk, bool $ping): int
    {
        $this->send(Frame::pack($this->codec, $ctx . $chunk, [$len], Frame::STREAM | ($ping ? Frame::STREAM_PING : 0)));
        if (!$ping) {
            return 0;
        }
        $reply = $this->receive();
        if ($reply === null) {
            $this->stopped = true;
            $this->pending = false;
            return 2;
        }
        return ($reply->stream & Frame::STREAM_STOP) !== 0 ? 1 : 0;
    }

    /** @internal ResponseStream's: the last frame of the answer. */
    public function endStream(string $ctx, int $len): void
    {
        $this->pending = false;
        $this->send(Frame::pack($this->codec, $ctx, [$len]));
    }

    /** Fails the current request: the server answers 500 and logs $message; the worker stays. */
    public function error(string $message): void
    {
        if (!$this->pending) {
            throw new \LogicException('error(): no request is waiting for an answer');
        }
        $this->pending = false;
        $this->send(Frame::pack(Frame::ERROR, $message));
    }

    /**
     * Asks the server to recycle this worker instead of answering: the server gives the current request
     * to another worker. The loop ends (waitRequest() returns null). Without a current request it only
     * ends the loop.
     */
    public function requestStop(): void
    {
        if ($this->pending) {
            $this->pending = false;
            $this->send(Frame::pack(0, self::STOP_PAYLOAD, [\strlen(self::STOP_PAYLOAD)]));
        }
        $this->stopped = true;
    }

    /**
     * Loops over requests: $handler(Request) returns a Response, [status, headers, body] or a string
     * (200). An uncaught Throwable becomes an ERROR frame (the server answers 500), is logged to stderr
     * and the loop goes on. The handler may answer by itself (respond(), error(), requestStop()). What the
     * handler prints (echo, print, var_dump) is sent before the body it returns, as php-fpm sends it; when
     * it answered by itself or failed, what it printed goes to the log.
     *
     * @param callable(Request): mixed $handler returns Response|array{int, array, string}|string|null
     */
    public function serve(callable $handler): void
    {
        while (($request = $this->waitRequest()) !== null) {
            $frame = null;
            $printed = '';
            try {
                $level = \ob_get_level();
                \ob_start();
                try {
                    $result = $handler($request);
                } finally {
                    while (\ob_get_level() > $level) {
                        $printed = \ob_get_clean() . $printed;
                    }
                }
                if ($this->pending && $result instanceof StreamedResponse) {
                    $chunks = $printed === '' ? $result->chunks : (static function () use ($printed, $result): \Generator {
                        yield $printed;
                        yield from $result->chunks;
                    })();
                    $printed = '';
                    $this->stream($result->status, $result->headers, $chunks);
                    continue;
                }
                if ($this->pending) {
                    [$status, $headers, $body] = self::result($result);
                    if ($printed !== '') { // printed before the body, as php-fpm sends it (and the length is ours)
                        $headers = \array_filter($headers, static fn ($n): bool => \strcasecmp((string) $n, 'Content-Length') !== 0, \ARRAY_FILTER_USE_KEY);
                        $body = $printed . $body;
                        $printed = '';
                    }
                    $frame = $this->responseFrame($status, $headers, $body);
                }
            } catch (\Throwable $e) {
                self::log(\sprintf(
                    "ferry worker: %s: %s in %s:%d\n%s",
                    $e::class,
                    $e->getMessage(),
                    $e->getFile(),
                    $e->getLine(),
                    $e->getTraceAsString(),
                ));
                if ($this->pending) {
                    $this->error($e->getMessage() !== '' ? $e->getMessage() : $e::class);
                }
                continue;
            } finally {
                if ($printed !== '') {
                    echo $printed; // the handler answered by itself, or failed: to the log (StdoutGuard)
                }
            }
            if ($frame !== null) {
                // Outside the try: a failing relay is not the application's error.
                $this->pending = false;
                $this->send($frame);
            }
        }
    }

    /**
     * @return array{int, array<string, string|list<string>>, string}
     */
    private static function result(mixed $result): array
    {
        if ($result instanceof Response) {
            return [$result->status, $result->headers, $result->body];
        }
        if (\is_string($result)) {
            return [200, [], $result];
        }
        if (\is_array($result) && \is_int($result[0] ?? null)) {
            $headers = $result[1] ?? [];
            $body = $result[2] ?? '';
            if (\is_array($headers) && \is_string($body)) {
                return [$result[0], $headers, $body];
            }
        }
        throw new \UnexpectedValueException(\sprintf(
            'the handler must return a %s, [int status, array headers, string body] or a string, got %s',
            Response::class,
            \get_debug_type($result),
        ));
    }

    /**
     * @param array<array-key, mixed> $headers
     */
    /**
     * Between two requests, what php-fpm gets by ending each request: a worker's heap does not keep a
     * request's garbage or peak, nor the boot's. Reference cycles a request left (framework objects point at each other)
     * are collected once they hold GARBAGE_BYTES more than the heap held after the last collection (PHP's
     * own collector waits for 10,000 possible roots, megabytes later); and after a request that grew the
     * heap past what it now uses, the memory manager's freed chunks go back to the system.
     */
    private function tidyMemory(): void
    {
        $used = \memory_get_usage();
        if ($this->liveHeap === null) {
            // Before the first request (in a fork template: before the first fork, whose children would each
            // map the template's heap): what the boot left as garbage (a container compiled, config parsed)
            \gc_collect_cycles();
            \gc_mem_caches();
            $this->liveHeap = \memory_get_usage();
        } elseif ($used > $this->liveHeap + self::GARBAGE_BYTES) {
            \gc_collect_cycles();
            $this->liveHeap = \memory_get_usage();
        }
        if (\memory_get_peak_usage(true) > \memory_get_usage(true)) {
            \gc_mem_caches();
            \memory_reset_peak_usage();
        }
    }

    private function responseFrame(int $status, array $headers, string $body): string
    {
        [$ctx, $len] = $this->context($status, $headers);
        return Frame::pack($this->codec, $ctx . $body, [$len]);
    }

    /**
     * The encoded response context and its length.
     *
     * @param array<array-key, mixed> $headers
     * @return array{string, int}
     */
    private function context(int $status, array $headers): array
    {
        foreach ($headers as $name => $values) {
            if (!\is_array($values)) {
                $headers[$name] = [self::headerValue($values)];
                continue;
            }
            if (!\array_is_list($values)) {
                $values = \array_values($values);
                $headers[$name] = $values;
            }
            foreach ($values as $i => $v) {
                if (!\is_string($v)) {
                    $headers[$name][$i] = self::headerValue($v);
                }
            }
        }
        $ctx = Codec::encodeResponse($this->codec, $status, $headers);
        return [$ctx, \strlen($ctx)];
    }

    private static function headerValue(mixed $v): string
    {
        if (\is_string($v)) {
            return $v;
        }
        if (\is_scalar($v) || $v instanceof \Stringable) {
            return (string) $v;
        }
        throw new \InvalidArgumentException('header values must be strings, got ' . \get_debug_type($v));
    }

    private function handshake(): void
    {
        $frame = $this->receive();
        if ($frame === null) {
            $this->stopped = true; // the server went away before saying anything
            return;
        }
        if (($frame->flags & Frame::CONTROL) === 0) {
            $this->fail(new ProtocolException(
                \sprintf('expected the PID control frame, got flags 0x%02x', $frame->flags),
                $frame->payload,
            ));
        }
        $this->control($frame);
    }

    private function control(Frame $frame): void
    {
        try {
            $cmd = \json_decode($frame->payload, true, 16, \JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            $this->fail(new ProtocolException('bad control frame: ' . $e->getMessage(), $frame->payload));
        }
        if (!\is_array($cmd)) {
            $this->fail(new ProtocolException('bad control frame', $frame->payload));
        }
        if (!empty($cmd['stop'])) {
            $this->stopped = true;
            ForkTemplate::serverStopped();
            return;
        }
        if (\array_key_exists('pid', $cmd)) {
            $reply = ['pid' => \getmypid()];
            if ($this->msgpack) {
                $reply['codec'] = 'msgpack';
            }
            if (!empty($cmd['template'])) {
                // docs/protocol.md §8: the server wants this process as its fork template.
                $why = \is_int($cmd['pid']) && $cmd['pid'] > 0 ? ForkTemplate::unsupported() : 'bad server pid';
                $reply['template'] = $why === null;
                if ($why !== null) {
                    $reply['why'] = $why;
                } else {
                    $this->templateFor = $cmd['pid'];
                }
            }
            $this->send(Frame::pack(Frame::CONTROL, \json_encode($reply, \JSON_THROW_ON_ERROR)));
            return;
        }
        self::log('ferry worker: ignoring unknown control frame ' . $frame->payload);
    }

    private function receive(): ?Frame
    {
        try {
            return $this->relay->receive();
        } catch (ProtocolException $e) {
            $this->fail($e);
        }
    }

    private function send(string $frame): void
    {
        try {
            $this->relay->send($frame);
        } catch (ProtocolException $e) {
            $this->fail($e);
        }
        StdoutGuard::rearm();
    }

    /** @throws ProtocolException */
    private function fail(ProtocolException $e): never
    {
        if ($this->exitOnFailure) {
            self::log('ferry worker: protocol error: ' . $e->getMessage());
            exit(2);
        }
        throw $e;
    }

    /** A line on stderr (the server logs it with the worker's pid). */
    public static function log(string $line): void
    {
        $stderr = \defined('STDERR') ? \STDERR : \fopen('php://stderr', 'wb');
        \fwrite($stderr, $line . "\n");
    }
}
