<?php

declare(strict_types=1);

namespace Ferry\Worker;

/** The byte stream from the server is not valid Goridge v3 (or ended in the middle of a frame). */
final class ProtocolException extends \RuntimeException
{
    public function __construct(string $message, public readonly string $bytes = '', ?\Throwable $previous = null)
    {
        if ($bytes !== '') {
            $message .= ' (bytes: ' . \bin2hex(\substr($bytes, 0, 64)) . (\strlen($bytes) > 64 ? '…' : '') . ')';
        }
        parent::__construct($message, 0, $previous);
    }
}
