<?php

declare(strict_types=1);

namespace Ferry\Worker;

/** What a serve() handler may return (an array [status, headers, body] works as well). */
final class Response
{
    /**
     * @param array<string, string|list<string>> $headers a value may be one string or a list of values
     */
    public function __construct(
        public readonly int $status = 200,
        public readonly array $headers = [],
        public readonly string $body = '',
    ) {
    }
}
