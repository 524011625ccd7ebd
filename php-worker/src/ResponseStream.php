<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * A response body sent as it is written (Worker::openStream()): each write() is one frame on its way to the
 * client; close() ends the answer. After the client left, write() returns false and sends nothing more.
 */
final class ResponseStream
{
    private int $sent = 0;
    private bool $open = true;
    private bool $complete = true;

    /** @internal made by Worker::openStream() */
    public function __construct(private readonly Worker $worker, private readonly string $ctx, private readonly int $len)
    {
    }

    /** Sends $chunk; false when the client went away (or the server): the rest need not be produced. */
    public function write(string $chunk): bool
    {
        if (!$this->open || !$this->complete) {
            return false;
        }
        $r = $this->worker->sendStreamFrame($this->ctx, $this->len, $chunk, ++$this->sent % 5 === 0);
        if ($r === 2) {
            $this->open = false;
        }
        if ($r !== 0) {
            $this->complete = false;
        }
        return $r === 0;
    }

    /** Ends the answer; false when it was cut short (the client left). Idempotent. */
    public function close(): bool
    {
        if ($this->open) {
            $this->open = false;
            $this->worker->endStream($this->ctx, $this->len);
        }
        return $this->complete;
    }

    public function isOpen(): bool
    {
        return $this->open && $this->complete;
    }
}
