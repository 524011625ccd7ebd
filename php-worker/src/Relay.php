<?php

declare(strict_types=1);

namespace Ferry\Worker;

/** Moves whole frames between the worker and the server. */
interface Relay
{
    /**
     * Reads the next frame; null when the input ended cleanly at a frame boundary.
     *
     * @throws ProtocolException on a truncated or corrupt frame or a read error
     */
    public function receive(): ?Frame;

    /**
     * Writes one encoded frame (see Frame::pack()) in one write whenever the pipe accepts it.
     *
     * @throws ProtocolException when the output is gone
     */
    public function send(string $frame): void;
}
