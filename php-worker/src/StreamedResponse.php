<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * A response whose body is sent as it is produced (docs/protocol.md §4): each string $chunks yields goes to the
 * client at once (chunked over HTTP/1.1). Return it from a serve() handler, or pass it to Worker::stream().
 */
final class StreamedResponse
{
    /**
     * @param array<string, string|list<string>> $headers
     * @param iterable<string>                    $chunks
     */
    public function __construct(
        public readonly int $status,
        public readonly array $headers,
        public readonly iterable $chunks,
    ) {
    }

    /**
     * Server-sent events: each item is a string (one `data:` event) or an array with `data` and optionally
     * `event`, `id`, `retry`; multi-line data becomes several `data:` lines.
     *
     * @param iterable<string|array{data?: string, event?: string, id?: string, retry?: int}> $events
     */
    public static function sse(iterable $events, array $headers = []): self
    {
        return new self(200, $headers + [
            'Content-Type' => 'text/event-stream',
            'Cache-Control' => 'no-cache',
        ], self::events($events));
    }

    /** @return \Generator<string> */
    private static function events(iterable $events): \Generator
    {
        foreach ($events as $event) {
            $event = \is_array($event) ? $event : ['data' => (string) $event];
            $out = '';
            foreach (['event', 'id', 'retry'] as $field) {
                if (isset($event[$field])) {
                    $out .= $field . ': ' . \str_replace(["\r", "\n"], '', (string) $event[$field]) . "\n";
                }
            }
            foreach (\preg_split('/\r\n|\r|\n/', (string) ($event['data'] ?? '')) as $line) {
                $out .= 'data: ' . $line . "\n";
            }
            yield $out . "\n";
        }
    }
}
