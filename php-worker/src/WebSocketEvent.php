<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * One event of a WebSocket connection held by the server (docs/protocol.md §9): the upgrade ("open"), a
 * client message ("message") or its end ("close"). Events of one connection arrive in order.
 */
final class WebSocketEvent
{
    public const OPEN = 'open';
    public const MESSAGE = 'message';
    public const CLOSE = 'close';

    /**
     * @param string  $type    open, message or close
     * @param string  $id      the connection's id ("1.42"; "web-1.1.42" with a broker): send to it or close it from any worker, on any node
     * @param string  $data    what this connection's worker attached with WebSocketActions::data()
     * @param string  $payload message: its bytes; close: the reason
     * @param Request $request open: the upgrade request (headers, cookies, query, remote address); later
     *                         events: the same URI and remote address, no headers
     * @param string  $transport   "websocket", or "sse" for a server-sent events stream (open and close only)
     * @param list<string> $topics sse open: the topics the client asks for (?topic=a&topic=b); it reads only
     *                             those the worker joins it to
     * @param string  $lastEventId sse open: the client's Last-Event-ID (it resumes from the topics' history)
     */
    public function __construct(
        public readonly string $type,
        public readonly string $id,
        public readonly string $data,
        public readonly string $payload,
        public readonly bool $binary,
        public readonly int $code,
        public readonly Request $request,
        public readonly string $transport = 'websocket',
        public readonly array $topics = [],
        public readonly string $lastEventId = '',
    ) {
    }

    /** The event a request of a websockets worker carries; null when the request is not one. */
    public static function fromRequest(Request $request): ?self
    {
        $a = $request->attributes;
        $type = $a['ferry.ws.event'] ?? null;
        if (!\in_array($type, [self::OPEN, self::MESSAGE, self::CLOSE], true)) {
            return null;
        }
        return new self(
            type: $type,
            id: (string) ($a['ferry.ws.id'] ?? ''),
            data: (string) ($a['ferry.ws.data'] ?? ''),
            payload: $type === self::CLOSE ? (string) ($a['ferry.ws.reason'] ?? '') : $request->body,
            binary: ($a['ferry.ws.type'] ?? '') === 'binary',
            code: (int) ($a['ferry.ws.code'] ?? 0),
            request: $request,
            transport: ($a['ferry.ws.transport'] ?? '') === 'sse' ? 'sse' : 'websocket',
            topics: self::topics((string) ($a['ferry.sse.topics'] ?? '')),
            lastEventId: (string) ($a['ferry.sse.last_event_id'] ?? ''),
        );
    }

    /** @return list<string> */
    private static function topics(string $json): array
    {
        if ($json === '') {
            return [];
        }
        $list = \json_decode($json, true);
        return \is_array($list) ? \array_values(\array_filter($list, 'is_string')) : [];
    }
}
