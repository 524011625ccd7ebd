<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Codec;
use Ferry\Worker\Frame;
use Ferry\Worker\Request;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\Tests\Support\ActionsBody;
use Ferry\Worker\Tests\Support\Wire;
use Ferry\Worker\WebSocketActions;
use Ferry\Worker\WebSocketEvent;
use Ferry\Worker\WebSockets;
use Ferry\Worker\Worker;
use PHPUnit\Framework\TestCase;

/** docs/protocol.md §9: WebSocketEvent from the server's requests, and the WebSockets loop end to end. */
final class WebSocketTest extends TestCase
{
    /** @var resource */
    private $out;

    // ---------------------------------------------------------------- helpers

    /**
     * A request frame of a websockets worker.
     *
     * @param array<string, string> $attributes
     * @param array<string, mixed>  $overrides
     */
    private static function event(array $attributes, string $body = '', array $overrides = [], int $codec = Frame::JSON): string
    {
        return Wire::request(['attributes' => $attributes] + $overrides, $body, $codec);
    }

    /** @return array<string, mixed> the context of an "open" as the server sends it */
    private static function openContext(string $id = '1.42'): array
    {
        return [
            'method' => 'GET',
            'uri' => 'http://example.test:8080/ws?room=lobby',
            'rawQuery' => 'room=lobby',
            'headers' => [
                'Connection' => ['Upgrade'],
                'Upgrade' => ['websocket'],
                'Sec-WebSocket-Version' => ['13'],
                'Sec-WebSocket-Key' => ['dGhlIHNhbXBsZSBub25jZQ=='],
                'Sec-WebSocket-Protocol' => ['chat, superchat'],
            ],
            'attributes' => ['ferry.ws.event' => 'open', 'ferry.ws.id' => $id],
        ];
    }

    /** @return array<string, mixed> a "message"/"close" context: same URI and address, no headers */
    private static function laterContext(array $attributes): array
    {
        return [
            'method' => 'POST',
            'uri' => 'http://example.test:8080/ws?room=lobby',
            'rawQuery' => 'room=lobby',
            'headers' => new \stdClass(),
            'cookies' => new \stdClass(),
            'attributes' => $attributes,
        ];
    }

    private function loop(string $input, bool $msgpack = false): WebSockets
    {
        $this->out = Wire::memory();
        return new WebSockets(new Worker(new StreamRelay(Wire::memory(Wire::pidFrame() . $input), $this->out), $msgpack));
    }

    /** @return list<Frame> the frames the worker wrote after its PID reply */
    private function sent(): array
    {
        $frames = Wire::frames(Wire::drain($this->out));
        self::assertNotEmpty($frames);
        self::assertSame(Frame::CONTROL, $frames[0]->flags, 'the PID reply comes first');
        return \array_slice($frames, 1);
    }

    /** @return list<array{int, string}> codec, name */
    public static function codecs(): array
    {
        return ['json' => [Frame::JSON], 'msgpack' => [Frame::MSGPACK]];
    }

    // ---------------------------------------------------------------- WebSocketEvent::fromRequest()

    public function testOpenEventFromTheServersContext(): void
    {
        $request = Request::fromContext(Wire::context(self::openContext('1.42')), '', Frame::JSON);
        $event = WebSocketEvent::fromRequest($request);
        self::assertNotNull($event);
        self::assertSame(WebSocketEvent::OPEN, $event->type);
        self::assertSame('open', $event->type);
        self::assertSame('1.42', $event->id);
        self::assertSame('', $event->data);
        self::assertSame('', $event->payload);
        self::assertFalse($event->binary);
        self::assertSame(0, $event->code);
        self::assertSame($request, $event->request);
        self::assertSame('GET', $event->request->method);
        self::assertSame('/ws', $event->request->path);
        self::assertSame(['room' => 'lobby'], $event->request->query);
        self::assertSame('chat, superchat', $event->request->header('sec-websocket-protocol'));
        self::assertSame(['session' => 'abc def', 'theme' => 'dark'], $event->request->cookies);
        self::assertSame('10.0.0.7', $event->request->remoteAddr);
    }

    public function testEventStreamOpenAndClose(): void
    {
        $ctx = self::openContext('2.7');
        $ctx['uri'] = 'http://example.test:8080/events?topic=a&topic=b%2Fc';
        $ctx['attributes'] += ['ferry.ws.transport' => 'sse', 'ferry.sse.topics' => '["a","b/c",7]',
            'ferry.sse.last_event_id' => '41'];
        $open = WebSocketEvent::fromRequest(Request::fromContext(Wire::context($ctx), '', Frame::JSON));
        self::assertNotNull($open);
        self::assertSame('sse', $open->transport);
        self::assertSame(['a', 'b/c'], $open->topics, 'strings only, in order');
        self::assertSame('41', $open->lastEventId);
        $close = WebSocketEvent::fromRequest(Request::fromContext(Wire::context(self::laterContext([
            'ferry.ws.event' => 'close', 'ferry.ws.id' => '2.7', 'ferry.ws.transport' => 'sse', 'ferry.ws.code' => '1006',
        ])), '', Frame::JSON));
        self::assertSame('sse', $close->transport);
        self::assertSame(1006, $close->code);
        $ws = WebSocketEvent::fromRequest(Request::fromContext(Wire::context(self::openContext()), '', Frame::JSON));
        self::assertSame('websocket', $ws->transport);
        self::assertSame([], $ws->topics);
        self::assertSame('', $ws->lastEventId);
        $bad = self::openContext();
        $bad['attributes'] += ['ferry.sse.topics' => 'not json'];
        self::assertSame([], WebSocketEvent::fromRequest(Request::fromContext(Wire::context($bad), '', Frame::JSON))->topics);
    }

    public function testTextMessageEventCarriesBodyAndData(): void
    {
        $ctx = Wire::context(self::laterContext([
            'ferry.ws.event' => 'message',
            'ferry.ws.id' => '3.9',
            'ferry.ws.data' => 'user=7',
            'ferry.ws.type' => 'text',
        ]));
        $event = WebSocketEvent::fromRequest(Request::fromContext($ctx, 'héllo', Frame::JSON));
        self::assertNotNull($event);
        self::assertSame(WebSocketEvent::MESSAGE, $event->type);
        self::assertSame('3.9', $event->id);
        self::assertSame('user=7', $event->data);
        self::assertSame('héllo', $event->payload);
        self::assertFalse($event->binary);
        self::assertSame(0, $event->code);
        self::assertSame([], $event->request->headers);
        self::assertSame('POST', $event->request->method);
    }

    public function testBinaryMessageEvent(): void
    {
        $bytes = "\x00\xff\x01binary\0";
        $request = new Request(
            method: 'POST',
            uri: 'http://h.test/ws',
            path: '/ws',
            query: [],
            rawQuery: '',
            protocol: 'HTTP/1.1',
            headers: [],
            cookies: [],
            body: $bytes,
            remoteAddr: '127.0.0.1',
            attributes: ['ferry.ws.event' => 'message', 'ferry.ws.id' => '1.1', 'ferry.ws.data' => '', 'ferry.ws.type' => 'binary'],
        );
        $event = WebSocketEvent::fromRequest($request);
        self::assertNotNull($event);
        self::assertSame(WebSocketEvent::MESSAGE, $event->type);
        self::assertTrue($event->binary);
        self::assertSame($bytes, $event->payload);
        self::assertSame('', $event->data);
    }

    public function testCloseEventCodeAndReason(): void
    {
        $ctx = Wire::context(self::laterContext([
            'ferry.ws.event' => 'close',
            'ferry.ws.id' => '2.5',
            'ferry.ws.data' => 'user=7',
            'ferry.ws.code' => '4001',
            'ferry.ws.reason' => 'see you',
        ]));
        $event = WebSocketEvent::fromRequest(Request::fromContext($ctx, '', Frame::JSON));
        self::assertNotNull($event);
        self::assertSame(WebSocketEvent::CLOSE, $event->type);
        self::assertSame('2.5', $event->id);
        self::assertSame(4001, $event->code);
        self::assertSame('see you', $event->payload, 'a close event carries its reason as the payload');
        self::assertSame('user=7', $event->data);
        self::assertFalse($event->binary);

        $dropped = Wire::context(self::laterContext([
            'ferry.ws.event' => 'close', 'ferry.ws.id' => '2.6', 'ferry.ws.data' => '', 'ferry.ws.code' => '1006', 'ferry.ws.reason' => '',
        ]));
        $event = WebSocketEvent::fromRequest(Request::fromContext($dropped, '', Frame::JSON));
        self::assertNotNull($event);
        self::assertSame(1006, $event->code);
        self::assertSame('', $event->payload);

        $bare = Wire::context(self::laterContext(['ferry.ws.event' => 'close', 'ferry.ws.id' => '2.7']));
        $event = WebSocketEvent::fromRequest(Request::fromContext($bare, 'ignored body', Frame::JSON));
        self::assertNotNull($event);
        self::assertSame(0, $event->code);
        self::assertSame('', $event->payload, 'the body is not the reason');
    }

    public function testRequestsThatAreNotEventsGiveNull(): void
    {
        self::assertNull(WebSocketEvent::fromRequest(Request::fromContext(Wire::context(), 'body', Frame::JSON)));
        foreach ([['route' => 'x'], ['ferry.ws.event' => 'upgrade', 'ferry.ws.id' => '1.1'], ['ferry.ws.event' => 'OPEN'],
                  ['ferry.ws.event' => ''], ['ferry.ws.event' => true], ['ferry.ws.event' => ['open']], ['ferry.ws.id' => '1.1']] as $attrs) {
            $request = Request::fromContext(Wire::context(['attributes' => $attrs]), '', Frame::JSON);
            self::assertNull(WebSocketEvent::fromRequest($request), \json_encode($attrs, \JSON_THROW_ON_ERROR));
        }
    }

    // ---------------------------------------------------------------- the WebSockets loop

    /** @dataProvider codecs */
    public function testLoopEndToEnd(int $codec): void
    {
        if ($codec === Frame::MSGPACK && !Codec::msgpackAvailable()) {
            self::markTestSkipped('ext-msgpack not loaded');
        }
        $input = Wire::request(self::openContext('1.42'), '', $codec)
            . Wire::request([], 'plain HTTP', $codec)
            . self::event(['ferry.ws.event' => 'message', 'ferry.ws.id' => '1.42', 'ferry.ws.data' => 'user=7',
                'ferry.ws.type' => 'binary'], "\x00\xffhi", self::laterContext([]), $codec)
            . self::event(['ferry.ws.event' => 'close', 'ferry.ws.id' => '1.42', 'ferry.ws.data' => 'user=7',
                'ferry.ws.code' => '1000', 'ferry.ws.reason' => 'done'], '', self::laterContext([]), $codec);
        $ws = $this->loop($input, $codec === Frame::MSGPACK);
        self::assertInstanceOf(Worker::class, $ws->worker());

        $open = $ws->next();
        self::assertNotNull($open);
        self::assertSame(WebSocketEvent::OPEN, $open->type);
        self::assertSame('1.42', $open->id);
        self::assertSame($codec, $open->request->codec);
        $onOpen = (new WebSocketActions())->join('chat')->data('user=7')->send('welcome');
        $ws->accept($onOpen, protocol: 'chat', headers: ['Set-Cookie' => ['a=1', 'b=2']]);

        $message = $ws->next(); // the plain HTTP request in between got 400
        self::assertNotNull($message);
        self::assertSame(WebSocketEvent::MESSAGE, $message->type);
        self::assertSame("\x00\xffhi", $message->payload);
        self::assertTrue($message->binary);
        self::assertSame('user=7', $message->data);
        $onMessage = (new WebSocketActions())->publish('chat', $message->payload, binary: true, excludeSelf: true);
        $ws->reply($onMessage);

        $close = $ws->next();
        self::assertNotNull($close);
        self::assertSame(WebSocketEvent::CLOSE, $close->type);
        self::assertSame(1000, $close->code);
        self::assertSame('done', $close->payload);
        $ws->reply();

        self::assertNull($ws->next(), 'EOF ends the loop');

        $frames = $this->sent();
        self::assertCount(4, $frames);
        foreach ($frames as $f) {
            self::assertSame($codec, $f->flags);
            self::assertCount(1, $f->options);
        }

        [$ctx, $body] = Wire::response($frames[0], $codec);
        self::assertSame(['status' => 101, 'headers' => [
            'Set-Cookie' => ['a=1', 'b=2'],
            'Sec-WebSocket-Protocol' => ['chat'],
        ]], $ctx);
        self::assertSame($onOpen->encode(), $body);
        [$actions, $messages] = ActionsBody::parse($body);
        self::assertSame([
            ['do' => 'join', 'topics' => ['chat']],
            ['do' => 'data', 'value' => 'user=7'],
            ['do' => 'send', 'size' => 7],
        ], $actions);
        self::assertSame(['welcome'], $messages);

        [$ctx, $body] = Wire::response($frames[1], $codec);
        self::assertSame(['status' => 400, 'headers' => ['Content-Type' => ['text/plain']]], $ctx);
        self::assertSame("not a WebSocket event\n", $body);

        [$ctx, $body] = Wire::response($frames[2], $codec);
        self::assertSame(['status' => 200, 'headers' => []], $ctx);
        self::assertSame($onMessage->encode(), $body);
        self::assertSame(
            '[{"do":"publish","topics":["chat"],"size":4,"binary":true,"exclude_self":true}]' . "\0\x00\xffhi",
            $body,
        );

        [$ctx, $body] = Wire::response($frames[3], $codec);
        self::assertSame(['status' => 200, 'headers' => []], $ctx);
        self::assertSame('', $body, 'reply() without actions: an empty body');
    }

    public function testAcceptWithoutActionsOrProtocol(): void
    {
        $ws = $this->loop(Wire::request(self::openContext()) . Wire::request(self::openContext('1.43')));
        self::assertNotNull($ws->next());
        $ws->accept();
        self::assertNotNull($ws->next());
        $ws->accept(new WebSocketActions()); // empty actions: an empty body as well
        $frames = $this->sent();
        self::assertCount(2, $frames);
        foreach ($frames as $f) {
            [$ctx, $body] = Wire::response($f, Frame::JSON);
            self::assertSame(['status' => 101, 'headers' => []], $ctx);
            self::assertSame('', $body);
        }
        self::assertSame('{"status":101,"headers":{}}', \substr($frames[0]->payload, 0, $frames[0]->options[0]));
    }

    public function testAcceptProtocolWinsOverAHeaderOfTheSameName(): void
    {
        $ws = $this->loop(Wire::request(self::openContext()));
        self::assertNotNull($ws->next());
        $ws->accept(protocol: 'chat', headers: ['Sec-WebSocket-Protocol' => 'superchat', 'X-Room' => 'lobby']);
        [$ctx] = Wire::response($this->sent()[0], Frame::JSON);
        self::assertSame(['status' => 101, 'headers' => ['Sec-WebSocket-Protocol' => ['chat'], 'X-Room' => ['lobby']]], $ctx);
    }

    public function testRejectStatusHeadersAndBody(): void
    {
        $ws = $this->loop(Wire::request(self::openContext('1.1')) . Wire::request(self::openContext('1.2'))
            . Wire::request(self::openContext('1.3')));
        self::assertNotNull($ws->next());
        $ws->reject(403, "go away\n");
        self::assertNotNull($ws->next());
        $ws->reject(401, '{"error":"login"}', ['Content-Type' => 'application/json', 'WWW-Authenticate' => 'Bearer']);
        self::assertNotNull($ws->next());
        $ws->reject();

        $frames = $this->sent();
        self::assertCount(3, $frames);
        [$ctx, $body] = Wire::response($frames[0], Frame::JSON);
        self::assertSame(['status' => 403, 'headers' => ['Content-Type' => ['text/plain; charset=utf-8']]], $ctx);
        self::assertSame("go away\n", $body);
        [$ctx, $body] = Wire::response($frames[1], Frame::JSON);
        self::assertSame(['status' => 401, 'headers' => [
            'Content-Type' => ['application/json'],
            'WWW-Authenticate' => ['Bearer'],
        ]], $ctx);
        self::assertSame('{"error":"login"}', $body);
        [$ctx, $body] = Wire::response($frames[2], Frame::JSON);
        self::assertSame(403, $ctx['status'], 'reject() defaults to 403');
        self::assertSame('', $body);
    }

    public function testRejectNeedsAStatusThatRefuses(): void
    {
        $ws = $this->loop(Wire::request(self::openContext()));
        self::assertNotNull($ws->next());
        foreach ([200, 101, 299, 600, 0, -1] as $status) {
            try {
                $ws->reject($status);
                self::fail("reject($status) must throw");
            } catch (\InvalidArgumentException $e) {
                self::assertStringContainsString('300-599', $e->getMessage());
            }
        }
        self::assertSame([], $this->sent(), 'nothing was written: the event still waits for its answer');
        $ws->reject(599);
        self::assertSame(599, Wire::response($this->sent()[0], Frame::JSON)[0]['status']);
        $ws2 = $this->loop(Wire::request(self::openContext()));
        self::assertNotNull($ws2->next());
        $ws2->reject(300);
        self::assertSame(300, Wire::response($this->sent()[0], Frame::JSON)[0]['status']);

        $ws3 = $this->loop(Wire::request(self::openContext()));
        self::assertNotNull($ws3->next());
        $this->expectException(\InvalidArgumentException::class);
        $ws3->reject(200);
    }

    public function testStopFrameAndOnlyHttpRequestsEndTheLoop(): void
    {
        $ws = $this->loop(Wire::request() . Wire::request([], 'again') . Wire::stopFrame() . Wire::request(self::openContext()));
        self::assertNull($ws->next(), 'the stop frame ends the loop before the open');
        $frames = $this->sent();
        self::assertCount(2, $frames, 'each plain request got its 400');
        foreach ($frames as $f) {
            self::assertSame(400, Wire::response($f, Frame::JSON)[0]['status']);
        }
    }

    public function testReplyBeforeAnEventIsALogicError(): void
    {
        $ws = $this->loop('');
        $this->expectException(\LogicException::class);
        $ws->reply();
    }
}
