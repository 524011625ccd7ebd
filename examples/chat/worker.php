<?php

// The chat example (README.md here): one script, two roles, chosen by RR_MODE.
//
// RR_MODE=http (http.pool): POST /login signs the user in (a cookie "chat_user=<name>.<hmac>") and announces
// "<name> joined" on the feed through the server's RPC listener; GET /me says who is signed in. Static files
// (public/) are sent by Ferry before a request could reach PHP.
//
// RR_MODE=websockets (websockets.pool, docs/protocol.md §9): the server holds every connection and asks this
// worker what to do on each event. /chat (WebSocket): signed-in users join topic "chat"; their messages are
// published to it as "<user>: <text>"; leaving announces "<user> left" on the feed. /feed (server-sent
// events): signed-in users read topic "feed", and only that one.
declare(strict_types=1);

// FERRY_PHP_WORKER: Ferry's PHP library, which ferry tells its workers (installed or in this repository).
require (getenv('FERRY_PHP_WORKER') ?: __DIR__ . '/../../php-worker') . '/autoload.php';

use Ferry\Worker\Request;
use Ferry\Worker\Rpc;
use Ferry\Worker\WebSocketActions;
use Ferry\Worker\WebSocketEvent;
use Ferry\Worker\WebSockets;
use Ferry\Worker\Worker;

const COOKIE = 'chat_user';
const JOINED_COOKIE = 'chat_joined';   // "show me my own join once": set at login, cleared by the feed
const MAX_TEXT = 500;                  // characters of one chat message

$secret = getenv('CHAT_SECRET');
if (!is_string($secret) || $secret === '') {
    $secret = 'ferry-chat-dev-secret';  // development only: set CHAT_SECRET in production
}

function valid_name(string $name): bool
{
    return preg_match('/^[A-Za-z0-9_-]{1,32}$/D', $name) === 1;
}

function sign(string $name, string $secret): string
{
    return $name . '.' . hash_hmac('sha256', $name, $secret);
}

/** The signed-in user of a request (its chat_user cookie), or null. */
function user_of(Request $req, string $secret): ?string
{
    $cookie = $req->cookies[COOKIE] ?? null;
    if (!is_string($cookie)) {
        return null;
    }
    $dot = strrpos($cookie, '.');
    if ($dot === false) {
        return null;
    }
    $name = substr($cookie, 0, $dot);
    if (!valid_name($name)) {
        return null;
    }
    return hash_equals(sign($name, $secret), $cookie) ? $name : null;
}

/** A chat message as it is shown: one line (control characters become spaces), trimmed, at most MAX_TEXT. */
function clean_text(string $text): string
{
    $text = trim((string) preg_replace('/[\p{Cc}\x{2028}\x{2029}]+/u', ' ', $text));
    if (preg_match('/^.{0,' . MAX_TEXT . '}/su', $text, $m) === 1) {
        $text = rtrim($m[0]);
    }
    return $text;
}

if (getenv('RR_MODE') !== 'websockets') {
    $worker = Worker::create();
    while ($req = $worker->waitRequest()) {
        try {
            if ($req->path === '/login' && $req->method === 'POST') {
                // A urlencoded form arrives parsed ($req->form); with http.raw_body it would be the body.
                $form = $req->parsed ? ($req->form ?? []) : [];
                if (!$req->parsed) {
                    parse_str($req->body, $form);
                }
                $name = is_string($form['name'] ?? null) ? trim($form['name']) : '';
                if (!valid_name($name)) {
                    $worker->respond(400, ['Content-Type' => 'text/html; charset=utf-8'],
                        "<!doctype html><title>Chat</title><p>A name is 1 to 32 letters, digits, _ or -."
                        . " <a href=\"/\">Back</a></p>\n");
                    continue;
                }
                Rpc::fromEnv()->publish('feed', "$name joined");
                $worker->respond(303, [
                    'Location' => '/',
                    'Set-Cookie' => [
                        COOKIE . '=' . sign($name, $secret) . '; Path=/; HttpOnly; SameSite=Lax',
                        JOINED_COOKIE . '=1; Path=/feed; Max-Age=60; HttpOnly; SameSite=Lax',
                    ],
                    'Cache-Control' => 'no-store',
                ]);
            } elseif ($req->path === '/me' && $req->method === 'GET') {
                $user = user_of($req, $secret);
                if ($user === null) {
                    $worker->respond(401, ['Content-Type' => 'text/plain; charset=utf-8', 'Cache-Control' => 'no-store'],
                        "not signed in\n");
                } else {
                    $worker->respond(200, ['Content-Type' => 'text/plain; charset=utf-8', 'Cache-Control' => 'no-store'],
                        $user);
                }
            } else {
                $worker->respond(404, ['Content-Type' => 'text/plain; charset=utf-8'], "not found\n");
            }
        } catch (Throwable $e) {
            fwrite(STDERR, 'chat: ' . get_class($e) . ': ' . $e->getMessage() . "\n");
            $worker->respond(500, ['Content-Type' => 'text/plain; charset=utf-8'], "internal error\n");
        }
    }
    exit(0);
}

// Connection data: the user's name. A feed stream's events say so ($e->transport === 'sse').
$ws = WebSockets::create();
while ($e = $ws->next()) {
    $a = new WebSocketActions();
    if ($e->type === WebSocketEvent::OPEN) {
        $user = user_of($e->request, $secret);
        if ($user === null) {
            $ws->reject(401, "sign in first (POST /login)\n");
            continue;
        }
        if ($e->transport === 'sse') {
            // Whatever topics the client asked for, it reads the feed only.
            $a->join('feed')->data($user);
            $headers = [];
            if (isset($e->request->cookies[JOINED_COOKIE]) && $e->lastEventId === '') {
                // The "joined" of this login was published before this stream existed: show it here once.
                $a->send("$user joined");
                $headers['Set-Cookie'] = JOINED_COOKIE . '=; Path=/feed; Max-Age=0; HttpOnly; SameSite=Lax';
            }
            $ws->accept($a, headers: $headers);
            continue;
        }
        $ws->accept($a->join('chat')->data($user)->send("welcome, $user (connection {$e->id})"));
        continue;
    }
    $sse = $e->transport === 'sse';
    $user = $e->data;
    if ($e->type === WebSocketEvent::CLOSE) {
        if (!$sse && $user !== '') {
            $a->publish('feed', "$user left");
        }
        $ws->reply($a);
        continue;
    }
    // A message: text only; binary ones and empty lines are ignored.
    if (!$sse && $user !== '' && !$e->binary) {
        $text = clean_text($e->payload);
        if ($text !== '') {
            $a->publish('chat', "$user: $text");
        }
    }
    $ws->reply($a);
}
