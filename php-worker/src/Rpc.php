<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * A client of the server's RPC listener (rpc.listen; docs/protocol.md §6), for application code: reset the
 * workers after a deploy step, list them on an admin page. The same frames and JSON as RoadRunner's
 * Spiral\Goridge\RPC\RPC, which can call these methods too.
 *
 *     $rpc = Rpc::fromEnv();              // RR_RPC, set by the server for its workers
 *     $rpc->reset();                      // resetter.Reset("http"): returns when every worker was replaced
 *     foreach ($rpc->workers() as $w) { echo $w['pid'], ' ', $w['statusStr'], "\n"; }
 */
final class Rpc
{
    /** @var resource|null */
    private $socket = null;
    private int $seq = 0;

    /**
     * @param string $address "tcp://127.0.0.1:6001" or "unix:///path/to.sock"
     * @param float  $timeout seconds to connect and to wait for an answer (a reset may take longer: see reset())
     */
    public function __construct(private readonly string $address, private readonly float $timeout = 10.0)
    {
        if (!\preg_match('#^(tcp://[^/]+:\d+|unix:///?.+)$#', $address)) {
            throw new \InvalidArgumentException("not an RPC address: \"$address\" (tcp://host:port or unix:///path)");
        }
    }

    /** The server's listener, from RR_RPC (the server sets it for its workers when rpc.listen is configured). */
    public static function fromEnv(): self
    {
        $address = \getenv('RR_RPC');
        if (!\is_string($address) || $address === '') {
            throw new ProtocolException('RR_RPC is not set: the server has no rpc.listen');
        }
        return new self($address);
    }

    /** Rolling reset of a pool's workers; returns once every worker was replaced. */
    public function reset(string $pool = 'http', float $timeout = 600.0): void
    {
        $this->call('resetter.Reset', $pool, $timeout);
    }

    /**
     * The workers: pid, status, statusStr, numExecs, created (unix ns), memoryUsage (bytes), CPUPercent, command.
     *
     * @return list<array<string, mixed>>
     */
    public function workers(string $pool = 'http'): array
    {
        $r = $this->call('informer.Workers', $pool);
        return \is_array($r) && \is_array($r['workers'] ?? null) ? $r['workers'] : [];
    }

    /**
     * Publishes a message to every WebSocket subscribed to one of the topics (websockets: in the server's
     * config). Binary data goes base64-encoded on the wire.
     *
     * @param string|list<string> $topics
     */
    public function publish(string|array $topics, string $message, bool $binary = false): void
    {
        $this->call('websockets.Publish', ['topics' => \is_array($topics) ? \array_values($topics) : [$topics]]
            + self::message($message, $binary));
    }

    /**
     * Sends a message to WebSocket connections by id (WebSocketEvent::$id).
     *
     * @param string|list<string> $to
     */
    public function send(string|array $to, string $message, bool $binary = false): void
    {
        $this->call('websockets.Send', ['to' => \is_array($to) ? \array_values($to) : [$to]]
            + self::message($message, $binary));
    }

    /**
     * Closes WebSocket connections by id with a close code (1000, 1001, 1003, 1007-1014, 3000-4999).
     *
     * @param string|list<string> $to
     */
    public function closeConnections(string|array $to, int $code = 1000, string $reason = ''): void
    {
        $this->call('websockets.Close', ['to' => \is_array($to) ? \array_values($to) : [$to], 'code' => $code,
            'reason' => $reason]);
    }

    /**
     * @return array<string, mixed>
     * @throws \InvalidArgumentException a text message that is not UTF-8 (no client would accept it)
     */
    private static function message(string $message, bool $binary): array
    {
        if ($binary) {
            return ['base64' => \base64_encode($message), 'binary' => true];
        }
        if (\preg_match('//u', $message) !== 1) {
            throw new \InvalidArgumentException('a text message must be valid UTF-8 (send bytes with binary: true)');
        }
        return ['message' => $message];
    }

    /**
     * One call: the decoded JSON result.
     *
     * @throws ProtocolException the server answered with an error (its message), or the connection failed
     */
    public function call(string $method, mixed $argument = null, ?float $timeout = null): mixed
    {
        // Unicode and slashes as they are: a message's size on the wire stays close to its own (the server's
        // RPC frame limit follows websockets.max_message_size).
        $body = \json_encode($argument, \JSON_UNESCAPED_UNICODE | \JSON_UNESCAPED_SLASHES | \JSON_THROW_ON_ERROR);
        // A connection kept from an earlier call may have been closed by the server while idle (it closes the
        // oldest idle one when its 64 slots are taken): nothing of this call reached it, so it is made once
        // more on a new connection. A fresh connection that fails is an error.
        $reused = \is_resource($this->socket);
        $reply = $this->exchange($method, $body, $timeout);
        if ($reply === null && $reused) {
            $reply = $this->exchange($method, $body, $timeout);
        }
        if ($reply === null) {
            throw new ProtocolException("the server closed the RPC connection during $method");
        }
        $seq = $this->seq;
        if (\count($reply->options) !== 2 || $reply->options[0] !== $seq) {
            $this->close();
            throw new ProtocolException("unexpected RPC answer to $method");
        }
        $payload = (string) \substr($reply->payload, $reply->options[1]);
        if (($reply->flags & Frame::ERROR) !== 0) {
            throw new ProtocolException("$method: $payload");
        }
        return $payload === '' ? null : \json_decode($payload, true, 64, \JSON_THROW_ON_ERROR);
    }

    /** One frame out and its answer; null (the connection closed) when the server closed it first. */
    private function exchange(string $method, string $body, ?float $timeout): ?Frame
    {
        $socket = $this->connect();
        $seq = ++$this->seq;
        $frame = Frame::pack(Frame::JSON, $method . $body, [$seq, \strlen($method)]);
        $relay = new StreamRelay($socket, $socket, $timeout ?? $this->timeout);
        try {
            $relay->send($frame);
            $reply = $relay->receive();
        } catch (ProtocolException $e) {
            $this->close();
            // The connection itself failed (reset, broken pipe): as closed. A timeout or a bad frame is not.
            $m = $e->getMessage();
            if (\str_starts_with($m, 'write to the server failed') || \str_starts_with($m, 'read from the server failed')) {
                return null;
            }
            throw $e;
        }
        if ($reply === null) {
            $this->close();
        }
        return $reply;
    }

    public function close(): void
    {
        if (\is_resource($this->socket)) {
            \fclose($this->socket);
        }
        $this->socket = null;
    }

    /** @return resource */
    private function connect()
    {
        if (\is_resource($this->socket)) {
            return $this->socket;
        }
        $s = @\stream_socket_client($this->address, $errno, $error, $this->timeout);
        if ($s === false) {
            throw new ProtocolException("cannot reach the server at {$this->address}: $error");
        }
        $this->socket = $s;
        return $s;
    }
}
