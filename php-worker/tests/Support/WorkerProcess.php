<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests\Support;

use Ferry\Worker\Frame;
use Ferry\Worker\StreamRelay;

/** A fixture worker started with proc_open: frames over its stdin/stdout, stderr into a temp file. */
final class WorkerProcess
{
    /** @var resource */
    private $proc;
    /** @var array<int, resource> */
    private array $pipes;
    private string $stderrFile;
    private ?int $exitCode = null;
    public readonly StreamRelay $relay;

    /** @param array<string, string> $env */
    public function __construct(string $script, array $env = [], float $timeout = 10.0)
    {
        $this->stderrFile = (string) \tempnam(\sys_get_temp_dir(), 'ferry-stderr-');
        $spec = [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', $this->stderrFile, 'w']];
        $proc = \proc_open([\PHP_BINARY, $script], $spec, $pipes, null, $env + \getenv());
        if (!\is_resource($proc)) {
            throw new \RuntimeException('cannot start ' . $script);
        }
        $this->proc = $proc;
        $this->pipes = $pipes;
        $this->relay = new StreamRelay($pipes[1], $pipes[0], $timeout);
    }

    public static function fixture(string $name): string
    {
        return \dirname(__DIR__, 3) . '/tests/php/' . $name;
    }

    public function send(string $frame): void
    {
        $this->relay->send($frame);
    }

    public function receive(): ?Frame
    {
        return $this->relay->receive();
    }

    /** Sends the PID frame and returns the decoded reply. @return array<string, mixed> */
    public function handshake(): array
    {
        $this->send(Wire::pidFrame(4242));
        $reply = $this->receive();
        if ($reply === null || $reply->flags !== Frame::CONTROL) {
            throw new \RuntimeException('no PID reply; stderr: ' . $this->stderr());
        }
        return \json_decode($reply->payload, true, 8, \JSON_THROW_ON_ERROR);
    }

    /** Everything the worker has written to its stdout until EOF (for garbage checks). */
    public function readStdoutToEnd(): string
    {
        return (string) \stream_get_contents($this->pipes[1]);
    }

    public function closeStdin(): void
    {
        if (\is_resource($this->pipes[0])) {
            \fclose($this->pipes[0]);
        }
    }

    /** Waits for the process to end; kills it after $timeout seconds. */
    public function wait(float $timeout = 10.0): int
    {
        $deadline = \microtime(true) + $timeout;
        while ($this->exitCode === null) {
            $status = \proc_get_status($this->proc);
            if (!$status['running']) {
                $this->exitCode = $status['signaled'] ? 128 + $status['termsig'] : $status['exitcode'];
                break;
            }
            if (\microtime(true) > $deadline) {
                \proc_terminate($this->proc, 9);
                throw new \RuntimeException('worker did not exit in time; stderr: ' . $this->stderr());
            }
            \usleep(5000);
        }
        return $this->exitCode;
    }

    public function pid(): int
    {
        return (int) \proc_get_status($this->proc)['pid'];
    }

    public function isRunning(): bool
    {
        return $this->exitCode === null && \proc_get_status($this->proc)['running'];
    }

    public function signal(int $signal): void
    {
        \proc_terminate($this->proc, $signal);
    }

    public function stderr(): string
    {
        return (string) \file_get_contents($this->stderrFile);
    }

    public function close(): void
    {
        foreach ($this->pipes as $p) {
            if (\is_resource($p)) {
                \fclose($p);
            }
        }
        if ($this->exitCode === null) {
            $status = \proc_get_status($this->proc);
            if ($status['running']) {
                \proc_terminate($this->proc, 9);
            }
        }
        \proc_close($this->proc);
        @\unlink($this->stderrFile);
    }
}
