<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * One HTTP request as the server relayed it (docs/protocol.md §3).
 */
final class Request
{
    /** @var array<string, string>|null lower-case name => first value, built on first header() call */
    private ?array $lower = null;

    /**
     * @param array<string, list<string>> $headers    canonical name => values (Host is only in $uri)
     * @param array<string, string>       $cookies
     * @param array<mixed>                $query      $rawQuery parsed like PHP's $_GET
     * @param array<mixed>|null           $form       the form tree when $parsed (the server parsed the body)
     * @param array<mixed>|null           $uploads    uploaded files tree: {name, mime, size, error, tmpName}
     * @param array<string, mixed>        $attributes
     */
    public function __construct(
        public readonly string $method,
        public readonly string $uri,
        public readonly string $path,
        public readonly array $query,
        public readonly string $rawQuery,
        public readonly string $protocol,
        public readonly array $headers,
        public readonly array $cookies,
        public readonly string $body,
        public readonly string $remoteAddr,
        public readonly bool $parsed = false,
        public readonly ?array $form = null,
        public readonly ?array $uploads = null,
        public readonly array $attributes = [],
        public readonly int $codec = Frame::JSON,
    ) {
    }

    /**
     * Builds a request from a decoded context and the frame's body.
     *
     * @param array<mixed> $ctx
     * @throws ProtocolException
     */
    public static function fromContext(array $ctx, string $body, int $codec): self
    {
        $uri = self::str($ctx, 'uri');
        $rawQuery = self::str($ctx, 'rawQuery');
        $path = \parse_url($uri, \PHP_URL_PATH);
        $query = [];
        if ($rawQuery !== '') {
            \parse_str($rawQuery, $query);
        }
        $parsed = (bool) ($ctx['parsed'] ?? false);
        $form = null;
        if ($parsed) {
            $form = $body === '' ? [] : Codec::normalize(Codec::decode($codec, $body));
        }
        $uploads = $ctx['uploads'] ?? null;
        return new self(
            method: self::str($ctx, 'method'),
            uri: $uri,
            path: \is_string($path) && $path !== '' ? $path : '/',
            query: $query,
            rawQuery: $rawQuery,
            protocol: self::str($ctx, 'protocol'),
            headers: self::map($ctx, 'headers'),
            cookies: self::map($ctx, 'cookies'),
            body: $body,
            remoteAddr: self::str($ctx, 'remoteAddr'),
            parsed: $parsed,
            form: $form,
            uploads: \is_array($uploads) || $uploads instanceof \stdClass ? Codec::normalize($uploads) : null,
            attributes: self::map($ctx, 'attributes'),
            codec: $codec,
        );
    }

    /** First value of a header, case-insensitive; null when absent. */
    public function header(string $name): ?string
    {
        if ($this->lower === null) {
            $this->lower = [];
            foreach ($this->headers as $k => $values) {
                $this->lower[\strtolower((string) $k)] ??= (string) ($values[0] ?? '');
            }
        }
        return $this->lower[\strtolower($name)] ?? null;
    }

    /**
     * All values of a header, case-insensitive.
     *
     * @return list<string>
     */
    public function headerValues(string $name): array
    {
        $want = \strtolower($name);
        $out = [];
        foreach ($this->headers as $k => $values) {
            if (\strtolower((string) $k) === $want) {
                \array_push($out, ...\array_map('strval', $values));
            }
        }
        return $out;
    }

    /** @param array<mixed> $ctx */
    private static function str(array $ctx, string $key): string
    {
        $v = $ctx[$key] ?? '';
        if (!\is_scalar($v)) {
            throw new ProtocolException(\sprintf('request context: "%s" must be a string', $key));
        }
        return (string) $v;
    }

    /**
     * @param array<mixed> $ctx
     * @return array<mixed>
     */
    private static function map(array $ctx, string $key): array
    {
        $v = $ctx[$key] ?? null;
        if ($v === null || $v instanceof \stdClass) {
            return $v === null ? [] : (array) $v;
        }
        if (!\is_array($v)) {
            throw new ProtocolException(\sprintf('request context: "%s" must be a map', $key));
        }
        return $v;
    }
}
