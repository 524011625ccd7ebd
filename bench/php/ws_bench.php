<?php

declare(strict_types=1);

// The WebSocket benchmark worker of bench/ws.sh (docs/protocol.md §9).
//   RR_MODE=websockets: open on /relay joins topic "relay" (with `websockets.relay: true` the core then
//   publishes every client message to it, not back to the sender, without PHP); any other path just
//   accepts. Message events (the echo instance) are sent back to the sender, same type. Close: no action.
//   Otherwise (HTTP pool): every request gets 200 "ok" (the script's readiness check).

require __DIR__ . '/../../php-worker/autoload.php';

use Ferry\Worker\WebSocketActions;
use Ferry\Worker\WebSocketEvent;
use Ferry\Worker\WebSockets;
use Ferry\Worker\Worker;

if (getenv('RR_MODE') !== 'websockets') {
    $worker = Worker::create();
    while ($worker->waitRequest()) {
        $worker->respond(200, ['Content-Type' => 'text/plain'], 'ok');
    }
    exit(0);
}

$ws = WebSockets::create();
while ($event = $ws->next()) {
    if ($event->type === WebSocketEvent::OPEN) {
        $ws->accept($event->request->path === '/relay' ? (new WebSocketActions())->join('relay') : null);
    } elseif ($event->type === WebSocketEvent::MESSAGE) {
        $ws->reply((new WebSocketActions())->send($event->payload, $event->binary));
    } else {
        $ws->reply();
    }
}
