<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * Frames over a pair of PHP streams: STDIN/STDOUT in a worker, pipes or memory streams in tests.
 *
 * Reads loop until every byte of the header, options and payload is there (a pipe may return fewer
 * bytes than asked). Each frame goes out with one fwrite() of the whole string, looping only if the
 * stream accepted part of it. fwrite() on the STDOUT stream resource bypasses PHP's output buffers.
 */
final class StreamRelay implements Relay
{
    /** Largest single fread(): PHP allocates the requested length up front. */
    private const READ_CHUNK = 1 << 20;

    /** @var resource */
    private $in;
    /** @var resource */
    private $out;

    /**
     * @param resource   $in
     * @param resource   $out
     * @param float|null $timeout seconds to wait for input before failing (null: wait forever)
     */
    public function __construct($in, $out, private readonly ?float $timeout = null)
    {
        if (!\is_resource($in) || !\is_resource($out)) {
            throw new \InvalidArgumentException('StreamRelay needs two open stream resources');
        }
        $this->in = $in;
        $this->out = $out;
    }

    public static function stdio(): self
    {
        if (!\defined('STDIN') || !\defined('STDOUT')) {
            throw new ProtocolException('STDIN/STDOUT are not available (run the worker with php-cli)');
        }
        // Fill PHP's read buffer a pipe's worth at a time (default 8 KiB): fewer read() calls for big bodies.
        @\stream_set_chunk_size(\STDIN, 1 << 16);
        return new self(\STDIN, \STDOUT);
    }

    public function receive(): ?Frame
    {
        $header = $this->read(Frame::HEADER_SIZE, true);
        if ($header === null) {
            return null;
        }
        $h = Frame::parseHeader($header);
        $options = $h['options'] > 0 ? Frame::unpackOptions((string) $this->read(4 * $h['options'])) : [];
        $payload = $h['length'] > 0 ? (string) $this->read($h['length']) : '';
        return new Frame($h['flags'], $payload, $options, $h['stream']);
    }

    public function send(string $frame): void
    {
        $total = \strlen($frame);
        $done = 0;
        while ($done < $total) {
            $n = @\fwrite($this->out, $done === 0 ? $frame : \substr($frame, $done));
            if ($n === false) {
                $err = \error_get_last();
                throw new ProtocolException('write to the server failed: ' . ($err['message'] ?? 'unknown error'));
            }
            if ($n === 0) {
                $this->wait(false);
                continue;
            }
            $done += $n;
        }
    }

    /**
     * @return string|null null only when $eofOk and the stream ended before the first byte
     */
    private function read(int $length, bool $eofOk = false): ?string
    {
        $buf = '';
        $have = 0;
        while ($have < $length) {
            if ($this->timeout !== null) {
                $this->wait(true);
            }
            $chunk = @\fread($this->in, \min($length - $have, self::READ_CHUNK));
            if ($chunk === false || $chunk === '') {
                if (\feof($this->in)) {
                    if ($have === 0 && $eofOk) {
                        return null;
                    }
                    throw new ProtocolException(
                        \sprintf('input ended in the middle of a frame (%d of %d bytes)', $have, $length),
                        $buf,
                    );
                }
                if ($chunk === false) {
                    $err = \error_get_last();
                    throw new ProtocolException('read from the server failed: ' . ($err['message'] ?? 'unknown error'));
                }
                $this->wait(true); // non-blocking stream with nothing to read yet
                continue;
            }
            $buf .= $chunk;
            $have += \strlen($chunk);
        }
        return $buf;
    }

    private function wait(bool $forRead): void
    {
        $r = $forRead ? [$this->in] : null;
        $w = $forRead ? null : [$this->out];
        $e = null;
        $sec = $this->timeout === null ? null : (int) $this->timeout;
        $usec = $this->timeout === null ? null : (int) (($this->timeout - (int) $this->timeout) * 1e6);
        $n = @\stream_select($r, $w, $e, $sec, $usec);
        if ($n === false) {
            // Streams without select support (php://memory, user wrappers): just retry the call.
            return;
        }
        if ($n === 0) {
            throw new ProtocolException(\sprintf('timed out after %.1f s waiting for the server', $this->timeout));
        }
    }
}
