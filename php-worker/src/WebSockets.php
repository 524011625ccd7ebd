<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * The loop of a websockets worker (RR_MODE=websockets; docs/protocol.md §9):
 *
 *     $ws = WebSockets::create();
 *     while ($event = $ws->next()) {
 *         match ($event->type) {
 *             WebSocketEvent::OPEN => $ws->accept((new WebSocketActions())->join('chat')),
 *             WebSocketEvent::MESSAGE => $ws->reply((new WebSocketActions())->publish('chat', $event->payload)),
 *             WebSocketEvent::CLOSE => $ws->reply(),
 *         };
 *     }
 */
final class WebSockets
{
    public function __construct(private readonly Worker $worker)
    {
    }

    public static function create(?Relay $relay = null): self
    {
        return new self(Worker::create($relay));
    }

    public function worker(): Worker
    {
        return $this->worker;
    }

    /** The next event, or null when the worker must end. A request that is not an event gets 400. */
    public function next(): ?WebSocketEvent
    {
        while ($request = $this->worker->waitRequest()) {
            $event = WebSocketEvent::fromRequest($request);
            if ($event !== null) {
                return $event;
            }
            $this->worker->respond(400, ['Content-Type' => 'text/plain'], "not a WebSocket event\n");
        }
        return null;
    }

    /**
     * Accepts an "open": the server answers 101 and runs the actions (join topics, attach data, send).
     *
     * @param array<string, string|list<string>> $headers more headers for the 101 (Set-Cookie...)
     */
    public function accept(?WebSocketActions $actions = null, ?string $protocol = null, array $headers = []): void
    {
        if ($protocol !== null) {
            $headers['Sec-WebSocket-Protocol'] = $protocol;
        }
        $this->worker->respond(101, $headers, $actions?->encode() ?? '');
    }

    /**
     * Refuses an "open": the client gets this status, headers and body instead of the upgrade.
     *
     * @param array<string, string|list<string>> $headers
     */
    public function reject(int $status = 403, string $body = '', array $headers = []): void
    {
        if ($status < 300 || $status > 599) {
            throw new \InvalidArgumentException('reject(): the status must be 300-599');
        }
        $named = \array_change_key_case($headers, \CASE_LOWER);
        if (!isset($named['content-type'])) {
            $headers['Content-Type'] = 'text/plain; charset=utf-8';
        }
        $this->worker->respond($status, $headers, $body);
    }

    /** Answers a "message" or "close" event. */
    public function reply(?WebSocketActions $actions = null): void
    {
        $this->worker->respond(200, [], $actions?->encode() ?? '');
    }
}
