<?php

declare(strict_types=1);

// The websockets fixture (RR_MODE=websockets; HTTP requests get a plain answer). Messages are commands:
//   pub:<topic>:<text>   publish to a topic          pubx:<topic>:<text>  publish, not to this connection
//   join:<topic>         leave:<topic>               to:<id>:<text>       send to another connection
//   close:<code>:<why>   close this connection       kick:<id>[,<id>] close others (4000; its own id too)
//   whoami               "<id> <data> <pid>"         seq:<n>              "seq:<n>" (ordering)
//   sleep:<ms>           answers "slept" after it    crash                exit(1) mid-event
//   bad                  malformed actions           data:<v>             attach <v> to the connection
//   big:<n>              a text message of n bytes   anything else        echoed (same type)
//   cut:<text>           the first byte of <text> as data and as a text message (half a character when
//                        <text> starts with one: both actions dropped by encode()), then "after the cut"
// open: ?reject=<status> refuses; ?topics=a,b joins them; ?user=<u> attaches it; a "chat" subprotocol offered
// is chosen; ?greet=1 sends "hello <id>". Every close event is published to topic "closes" as
// "closed <id> <code> <reason>".

require __DIR__ . '/../../php-worker/autoload.php';

use Ferry\Worker\Rpc;
use Ferry\Worker\WebSocketActions;
use Ferry\Worker\WebSocketEvent;
use Ferry\Worker\WebSockets;
use Ferry\Worker\Worker;

if (getenv('RR_MODE') !== 'websockets') {
    // HTTP: /publish?topic=&msg= (&binary=1), /send?to=&msg=, /kick?to= go through the RPC listener
    // (Ferry\Worker\Rpc), as an application's POST handler would; anything else is described.
    $worker = Worker::create();
    while ($req = $worker->waitRequest()) {
        $q = $req->query;
        try {
            if ($req->path === '/publish') {
                Rpc::fromEnv()->publish(explode(',', (string) $q['topic']), (string) $q['msg'], isset($q['binary']));
                $worker->respond(200, [], "published\n");
            } elseif ($req->path === '/send') {
                Rpc::fromEnv()->send((string) $q['to'], (string) $q['msg']);
                $worker->respond(200, [], "sent\n");
            } elseif ($req->path === '/kick') {
                Rpc::fromEnv()->closeConnections((string) $q['to'], 4003, 'kicked over RPC');
                $worker->respond(200, [], "kicked\n");
            } else {
                $worker->respond(200, ['Content-Type' => 'text/plain'], "http " . $req->method . " " . $req->path . "\n");
            }
        } catch (Throwable $e) {
            $worker->respond(500, [], get_class($e) . ': ' . $e->getMessage() . "\n");
        }
    }
    exit(0);
}

$ws = WebSockets::create();
while ($e = $ws->next()) {
    $a = new WebSocketActions();
    if ($e->type === WebSocketEvent::OPEN && $e->transport === 'sse') {
        // An event stream: the topics asked for, but never "secret"; ?reject=<status> refuses.
        $q = $e->request->query;
        if (isset($q['reject'])) {
            $ws->reject((int) $q['reject'], "no stream for you\n");
            continue;
        }
        $allowed = array_values(array_diff($e->topics, ['secret']));
        $a->join($allowed)->data('sse ' . $e->lastEventId);
        if (isset($q['greet'])) {
            $a->send("welcome\nto " . implode(',', $allowed));
        }
        if (isset($q['whoami'])) {
            $a->send('id ' . $e->id);
        }
        $ws->accept($a);
        continue;
    }
    if ($e->type === WebSocketEvent::OPEN) {
        $q = $e->request->query;
        if (isset($q['reject'])) {
            $ws->reject((int) $q['reject'], "refused by PHP\n", ['X-Why' => 'test']);
            continue;
        }
        if (isset($q['topics'])) {
            $a->join(explode(',', (string) $q['topics']));
        }
        if (isset($q['user'])) {
            $a->data((string) $q['user']);
        }
        if (isset($q['greet'])) {
            $a->send('hello ' . $e->id);
        }
        $offered = array_map('trim', explode(',', (string) ($e->request->header('Sec-WebSocket-Protocol') ?? '')));
        $ws->accept($a, in_array('chat', $offered, true) ? 'chat' : null, ['X-Worker' => (string) getmypid()]);
        continue;
    }
    if ($e->type === WebSocketEvent::CLOSE) {
        $ws->reply($a->publish('closes', "closed {$e->id} {$e->code} {$e->payload}"));
        continue;
    }
    $m = $e->payload;
    if ($e->binary) {
        $a->send($m, binary: true);
    } elseif (str_starts_with($m, 'pub:') || str_starts_with($m, 'pubx:')) {
        [$cmd, $topic, $text] = explode(':', $m, 3) + ['', '', ''];
        $a->publish($topic, $text, excludeSelf: $cmd === 'pubx');
    } elseif (str_starts_with($m, 'join:')) {
        $a->join(substr($m, 5))->send('joined ' . substr($m, 5));
    } elseif (str_starts_with($m, 'leave:')) {
        $a->leave(substr($m, 6))->send('left ' . substr($m, 6));
    } elseif (str_starts_with($m, 'to:')) {
        [, $id, $text] = explode(':', $m, 3) + ['', '', ''];
        $a->send($text, to: $id);
    } elseif (str_starts_with($m, 'close:')) {
        [, $code, $why] = explode(':', $m, 3) + ['', '1000', ''];
        $a->close((int) $code, $why);
    } elseif (str_starts_with($m, 'kick:')) {
        $a->close(4000, 'kicked', to: explode(',', substr($m, 5)));
    } elseif ($m === 'tonobody') {
        $a->send('to nobody', to: [])->close(4000, 'nobody', to: [])->send('after');
    } elseif ($m === 'whoami') {
        $a->send($e->id . ' ' . $e->data . ' ' . getmypid());
    } elseif (str_starts_with($m, 'seq:')) {
        $a->send($m);
    } elseif (str_starts_with($m, 'sleep:')) {
        usleep((int) substr($m, 6) * 1000);
        $a->send('slept');
    } elseif ($m === 'crash') {
        exit(1);
    } elseif ($m === 'bad') {
        $ws->worker()->respond(200, [], '{"not":"a list"}');
        continue;
    } elseif (str_starts_with($m, 'data:')) {
        $a->data(substr($m, 5))->send('ok');
    } elseif (str_starts_with($m, 'cut:')) {
        $half = substr($m, 4, 1);
        $a->data($half)->send($half)->send('after the cut');
    } elseif (str_starts_with($m, 'big:')) {
        $a->send(str_repeat('x', (int) substr($m, 4)));
    } else {
        $a->send($m);
    }
    $ws->reply($a);
}
