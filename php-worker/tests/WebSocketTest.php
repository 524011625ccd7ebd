<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Codec;
use Ferry\Worker\Frame;
use Ferry\Worker\ProtocolException;
use Ferry\Worker\Request;
use Ferry\Worker\Rpc;
use Ferry\Worker\StreamRelay;
use Ferry\Worker\Tests\Support\Wire;
use Ferry\Worker\WebSocketActions;
use Ferry\Worker\WebSocketEvent;
use Ferry\Worker\WebSockets;
use Ferry\Worker\Worker;
use PHPUnit\Framework\TestCase;

/** docs/protocol.md §9: WebSocketActions, WebSocketEvent, the WebSockets loop and the websockets.* RPC calls. */
final class WebSocketTest extends TestCase
{
    /** @var resource */
    private $out;

    /** @var resource|null the fake RPC server of rpcExchange() */
    private $proc = null;
    private string $stderrFile = '';

    protected function tearDown(): void
    {
        if (\is_resource($this->proc)) {
            $status = \proc_get_status($this->proc);
            if ($status['running']) {
                \proc_terminate($this->proc, 9);
            }
            \proc_close($this->proc);
        }
        $this->proc = null;
        if ($this->stderrFile !== '') {
            @\unlink($this->stderrFile);
            $this->stderrFile = '';
        }
    }

    // ---------------------------------------------------------------- helpers

    /**
     * Takes a reply body apart as the server does (server/src/ws/actions.cpp): split at the first NUL,
     * json_decode the first part, give each send/publish its "size" bytes of the rest, in order, and
     * require that the sizes use the rest exactly.
     *
     * @return array{list<array<string, mixed>>, list<string>} the actions and each send/publish's message
     */
    private static function parse(string $body): array
    {
        if ($body === '') {
            return [[], []];
        }
        $nul = \strpos($body, "\0");
        $doc = $nul === false ? $body : \substr($body, 0, $nul);
        $data = $nul === false ? '' : \substr($body, $nul + 1);
        $actions = \json_decode($doc, true, 16, \JSON_THROW_ON_ERROR);
        self::assertIsArray($actions);
        self::assertTrue(\array_is_list($actions), 'the actions are a JSON list');
        $messages = [];
        $used = 0;
        foreach ($actions as $i => $a) {
            self::assertIsArray($a, "action $i is an object");
            self::assertIsString($a['do'] ?? null, "action $i has a \"do\"");
            if ($a['do'] === 'send' || $a['do'] === 'publish') {
                self::assertIsInt($a['size'] ?? null, "action $i has an integer size");
                self::assertGreaterThanOrEqual(0, $a['size']);
                self::assertLessThanOrEqual(\strlen($data) - $used, $a['size'], "action $i stays inside the data");
                $messages[] = (string) \substr($data, $used, $a['size']);
                $used += $a['size'];
            }
        }
        self::assertSame(\strlen($data), $used, 'the sizes add up to the bytes after the NUL');
        return [$actions, $messages];
    }

    /** The JSON part of a body (before the first NUL). */
    private static function jsonPart(string $body): string
    {
        $nul = \strpos($body, "\0");
        return $nul === false ? $body : \substr($body, 0, $nul);
    }

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

    // ---------------------------------------------------------------- WebSocketActions::encode()

    public function testNoActionsEncodeToAnEmptyBody(): void
    {
        $a = new WebSocketActions();
        self::assertTrue($a->isEmpty());
        self::assertSame('', $a->encode());
        self::assertSame([[], []], self::parse($a->encode()));
        self::assertFalse($a->join('x')->isEmpty());
        self::assertNotSame('', $a->encode());
    }

    public function testTheExampleOfTheProtocolDocument(): void
    {
        $body = (new WebSocketActions())->join('chat')->publish('chat', 'hello', excludeSelf: true)->encode();
        self::assertSame(
            '[{"do":"join","topics":["chat"]},{"do":"publish","topics":["chat"],"size":5,"exclude_self":true}]' . "\0hello",
            $body,
        );
    }

    public function testSendShapes(): void
    {
        $a = (new WebSocketActions())
            ->send('to me')
            ->send('to one', to: '2.7')
            ->send('to many', to: [3 => '1.1', 9 => '4.2'])
            ->send("\x00\xffbin", binary: true)
            ->send('not binary', binary: false, to: ['self']);
        [$actions, $messages] = self::parse($a->encode());
        self::assertSame([
            ['do' => 'send', 'size' => 5],
            ['do' => 'send', 'size' => 6, 'to' => ['2.7']],
            ['do' => 'send', 'size' => 7, 'to' => ['1.1', '4.2']],
            ['do' => 'send', 'size' => 5, 'binary' => true],
            ['do' => 'send', 'size' => 10, 'to' => ['self']],
        ], $actions);
        self::assertSame(['to me', 'to one', 'to many', "\x00\xffbin", 'not binary'], $messages);
        self::assertStringNotContainsString('"binary":false', self::jsonPart($a->encode()), 'binary only when true');
    }

    public function testPublishShapes(): void
    {
        $a = (new WebSocketActions())
            ->publish('news', 'one')
            ->publish(['a', 'b'], 'two', excludeSelf: true)
            ->publish([5 => 'x'], "\xfe\x00", binary: true)
            ->publish('t', 'three', binary: true, excludeSelf: true);
        [$actions, $messages] = self::parse($a->encode());
        self::assertSame([
            ['do' => 'publish', 'topics' => ['news'], 'size' => 3],
            ['do' => 'publish', 'topics' => ['a', 'b'], 'size' => 3, 'exclude_self' => true],
            ['do' => 'publish', 'topics' => ['x'], 'size' => 2, 'binary' => true],
            ['do' => 'publish', 'topics' => ['t'], 'size' => 5, 'binary' => true, 'exclude_self' => true],
        ], $actions);
        self::assertSame(['one', 'two', "\xfe\x00", 'three'], $messages);
        self::assertStringNotContainsString('false', self::jsonPart($a->encode()));
    }

    public function testJoinLeaveCloseAndDataShapes(): void
    {
        $a = (new WebSocketActions())
            ->join('chat')
            ->join(['a', 'b'])
            ->leave('chat')
            ->leave([2 => 'a', 7 => 'b'])
            ->close()
            ->close(4001, 'bye now')
            ->close(1001, 'going away', '3.3')
            ->close(1000, '', ['1.1', '1.2'])
            ->data('user=7');
        $body = $a->encode();
        self::assertStringNotContainsString("\0", $body, 'no messages: no NUL and no data part');
        [$actions, $messages] = self::parse($body);
        self::assertSame([
            ['do' => 'join', 'topics' => ['chat']],
            ['do' => 'join', 'topics' => ['a', 'b']],
            ['do' => 'leave', 'topics' => ['chat']],
            ['do' => 'leave', 'topics' => ['a', 'b']],
            ['do' => 'close', 'code' => 1000, 'reason' => ''],
            ['do' => 'close', 'code' => 4001, 'reason' => 'bye now'],
            ['do' => 'close', 'code' => 1001, 'reason' => 'going away', 'to' => ['3.3']],
            ['do' => 'close', 'code' => 1000, 'reason' => '', 'to' => ['1.1', '1.2']],
            ['do' => 'data', 'value' => 'user=7'],
        ], $actions);
        self::assertSame([], $messages);
        self::assertSame(
            '[{"do":"join","topics":["chat"]},{"do":"join","topics":["a","b"]},{"do":"leave","topics":["chat"]},'
            . '{"do":"leave","topics":["a","b"]},{"do":"close","code":1000,"reason":""},'
            . '{"do":"close","code":4001,"reason":"bye now"},{"do":"close","code":1001,"reason":"going away","to":["3.3"]},'
            . '{"do":"close","code":1000,"reason":"","to":["1.1","1.2"]},{"do":"data","value":"user=7"}]',
            $body,
        );
    }

    public function testMessagesFollowTheNulInOrderWithMatchingSizes(): void
    {
        $big = \bin2hex(\random_bytes(50000)); // a text message: valid UTF-8 (binary ones are any bytes)
        $binary = "\x00\xff\x00\x00\xfe\x80NUL\0inside";
        $list = [
            ['send', 'first'],
            ['publish', $binary],
            ['send', ''],
            ['publish', 'héllo wörld ✓'],
            ['send', $big],
            ['send', "\0"],
            ['publish', "\u{ff}"],
        ];
        $a = new WebSocketActions();
        foreach ($list as $i => [$op, $msg]) {
            $op === 'send' ? $a->send($msg, binary: $i % 2 === 1) : $a->publish('t', $msg, binary: $i % 2 === 1);
            $a->join('between-' . $i); // text-only actions between the messages take no bytes
        }
        $body = $a->encode();
        $expectedData = \implode('', \array_column($list, 1));
        $nul = \strpos($body, "\0");
        self::assertNotFalse($nul);
        self::assertSame($expectedData, \substr($body, $nul + 1), 'the data part is the messages, raw, in order');
        [$actions, $messages] = self::parse($body);
        self::assertSame(\array_column($list, 1), $messages);
        self::assertCount(2 * \count($list), $actions);
        foreach ($list as $i => [$op, $msg]) {
            self::assertSame($op, $actions[2 * $i]['do']);
            self::assertSame(\strlen($msg), $actions[2 * $i]['size']);
            self::assertSame(['do' => 'join', 'topics' => ['between-' . $i]], $actions[2 * $i + 1]);
        }
    }

    public function testTheJsonHoldsNoPayload(): void
    {
        $text = 'PAYLOAD-"quoted"/\\slashed-é';
        $body = (new WebSocketActions())->send($text)->publish('t', "\x00\x01\xffBINARY-PAYLOAD", binary: true)->encode();
        $json = self::jsonPart($body);
        self::assertStringNotContainsString('PAYLOAD', $json);
        self::assertStringNotContainsString('"text"', $json, 'messages go by size, never inline');
        self::assertStringNotContainsString('base64', $json);
        self::assertStringNotContainsString('\\u', $json, 'nothing escaped');
        self::assertSame($text . "\x00\x01\xffBINARY-PAYLOAD", \substr($body, \strlen($json) + 1));
    }

    public function testNulsInTextFieldsAreEscapedSoTheFirstNulIsTheSeparator(): void
    {
        $body = (new WebSocketActions())
            ->data("a\0b")
            ->join("topic\0x")
            ->close(1000, "why\0not")
            ->send('m')
            ->encode();
        $json = self::jsonPart($body);
        self::assertStringContainsString('\\u0000', $json);
        self::assertSame('m', \substr($body, \strlen($json) + 1));
        [$actions, $messages] = self::parse($body);
        self::assertSame("a\0b", $actions[0]['value']);
        self::assertSame(["topic\0x"], $actions[1]['topics']);
        self::assertSame("why\0not", $actions[2]['reason']);
        self::assertSame(['m'], $messages);
    }

    public function testUnicodeAndSlashesStayUnescaped(): void
    {
        $body = (new WebSocketActions())->data('é/✓')->join('rooms/général')->encode();
        self::assertSame('[{"do":"data","value":"é/✓"},{"do":"join","topics":["rooms/général"]}]', $body);
    }

    public function testOnlyEmptyMessagesEncodeSizesZeroWithoutTheNul(): void
    {
        $a = (new WebSocketActions())->send('')->join('x')->publish('t', '', binary: true)->send('', to: '1.1');
        $body = $a->encode();
        // The implementation leaves the NUL out when no message has a byte: the server then sees no data
        // part, and sizes 0 take nothing from it.
        self::assertStringNotContainsString("\0", $body);
        self::assertSame(
            '[{"do":"send","size":0},{"do":"join","topics":["x"]},{"do":"publish","topics":["t"],"size":0,"binary":true},'
            . '{"do":"send","size":0,"to":["1.1"]}]',
            $body,
        );
        [$actions, $messages] = self::parse($body);
        self::assertSame([0, 0, 0], \array_column(\array_filter($actions, static fn (array $x): bool => isset($x['size'])), 'size'));
        self::assertSame(['', '', ''], $messages);

        // One non-empty message brings the NUL back, and the empty ones still take 0 bytes.
        $body = $a->send('z')->encode();
        self::assertSame(1, \substr_count($body, "\0"));
        self::assertStringEndsWith("\0z", $body);
        self::assertSame(['', '', '', 'z'], self::parse($body)[1]);
    }

    public function testEncodeCanBeCalledAgainAndKeepsAddingInOrder(): void
    {
        $a = (new WebSocketActions())->send('one');
        $first = $a->encode();
        self::assertSame($first, $a->encode(), 'encode() does not consume');
        $a->send('two');
        self::assertSame(['one', 'two'], self::parse($a->encode())[1]);
    }

    public function testAnActionThatCannotBeEncodedIsDroppedAndLoggedTheRestGoesOn(): void
    {
        // A client's bytes cut in the middle of a character end up in a data value, a topic, a close reason
        // or a text message: that action goes, the others stay (encode() once threw and the worker died).
        [$body, $log] = self::encodeInChild(<<<'PHP'
            (new Ferry\Worker\WebSocketActions())
                ->send('first')
                ->data("\xc3\x28")
                ->join(['ok', "bad \xff"])
                ->send("half \xc3", to: '1.2')
                ->send("\xff\xfe", binary: true)
                ->close(4000, "\xe2\x82")
                ->publish('t', 'last')
            PHP);
        [$actions, $messages] = self::parse($body);
        self::assertSame(['send', 'send', 'publish'], \array_column($actions, 'do'));
        self::assertSame(['first', "\xff\xfe", 'last'], $messages);
        self::assertSame(4, \substr_count($log, 'ferry-worker: dropped WebSocket action'), $log);
        self::assertStringContainsString('#2 ("data"): Malformed UTF-8', $log);
        self::assertStringContainsString('#3 ("join")', $log);
        self::assertStringContainsString('#4 ("send"): its text message is not valid UTF-8', $log);
        self::assertStringContainsString('#6 ("close")', $log);
    }

    public function testOnlyBadActionsEncodeToAnEmptyList(): void
    {
        [$body, $log] = self::encodeInChild('(new Ferry\Worker\WebSocketActions())->data("\xff")');
        self::assertSame('[]', $body);
        self::assertSame([[], []], self::parse($body));
        self::assertStringContainsString('dropped WebSocket action #1 ("data")', $log);
    }

    /**
     * encode() of the actions the PHP expression builds, in a child PHP (its log goes to the child's stderr).
     *
     * @return array{string, string} the body and what was logged
     */
    private static function encodeInChild(string $expression): array
    {
        $code = 'require ' . \var_export(\dirname(__DIR__) . '/autoload.php', true) . ';'
            . ' echo (' . $expression . ')->encode();';
        $proc = \proc_open([\PHP_BINARY, '-r', $code], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        self::assertIsResource($proc);
        $body = (string) \stream_get_contents($pipes[1]);
        $log = (string) \stream_get_contents($pipes[2]);
        \fclose($pipes[1]);
        \fclose($pipes[2]);
        self::assertSame(0, \proc_close($proc), $log);
        return [$body, $log];
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
        [$actions, $messages] = self::parse($body);
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

    // ---------------------------------------------------------------- Rpc websockets.*

    /**
     * Starts a fake RPC listener (a php -r child: Rpc::call writes then blocks reading, so the server must be
     * another process), runs $calls against it and returns what it received, one record per call: flags,
     * options, method, raw JSON argument. It answers "true", or an ERROR frame when the argument's code is 1005.
     *
     * With $dropAfterFirst it closes the connection after its first answer, as the server closes an idle one
     * to make room, and serves the rest on the next connection.
     *
     * @param callable(Rpc): void $calls
     * @return list<array{flags: int, options: list<int>, method: string, arg: string}>
     */
    private function rpcExchange(callable $calls, bool $dropAfterFirst = false): array
    {
        $autoload = \dirname(__DIR__) . '/autoload.php';
        $code = 'require ' . \var_export($autoload, true) . ';' . '$drop = ' . \var_export($dropAfterFirst, true) . ';' . <<<'PHP'
            use Ferry\Worker\Frame;
            use Ferry\Worker\StreamRelay;
            $srv = stream_socket_server('tcp://127.0.0.1:0', $errno, $err);
            if ($srv === false) { fwrite(STDERR, "listen: $err\n"); exit(1); }
            fwrite(STDOUT, stream_socket_get_name($srv, false) . "\n");
            $conn = @stream_socket_accept($srv, 10);
            if ($conn === false) { fwrite(STDERR, "no client\n"); exit(1); }
            $relay = new StreamRelay($conn, $conn, 10.0);
            $answered = 0;
            while (true) {
                if ($drop && $answered === 1) { // closed while idle, as to make room: the client comes back
                    $drop = false;
                    fclose($conn);
                    $conn = @stream_socket_accept($srv, 10);
                    if ($conn === false) { fwrite(STDERR, "no second connection\n"); exit(1); }
                    $relay = new StreamRelay($conn, $conn, 10.0);
                }
                if (($f = $relay->receive()) === null) { break; }
                $answered++;
                $mlen = $f->options[1] ?? 0;
                $method = substr($f->payload, 0, $mlen);
                $arg = (string) substr($f->payload, $mlen);
                fwrite(STDOUT, json_encode(['flags' => $f->flags, 'options' => $f->options, 'method' => $method,
                    'arg' => base64_encode($arg)]) . "\n");
                $decoded = json_decode($arg, true);
                if (is_array($decoded) && ($decoded['code'] ?? null) === 1005) {
                    $relay->send(Frame::pack($f->flags | Frame::ERROR, $method . '"code" is not a close code a server may send', $f->options));
                } else {
                    $relay->send(Frame::pack($f->flags, $method . 'true', $f->options));
                }
            }
            PHP;
        $this->stderrFile = (string) \tempnam(\sys_get_temp_dir(), 'ferry-rpc-');
        $proc = \proc_open([\PHP_BINARY, '-r', $code], [1 => ['pipe', 'w'], 2 => ['file', $this->stderrFile, 'w']], $pipes);
        self::assertIsResource($proc);
        $this->proc = $proc;
        $stdout = $pipes[1];
        $address = \trim(self::readLine($stdout, 10.0));
        self::assertMatchesRegularExpression('/^127\.0\.0\.1:\d+$/', $address, 'fake server stderr: ' . \file_get_contents($this->stderrFile));

        $rpc = new Rpc('tcp://' . $address, 5.0);
        try {
            $calls($rpc);
        } finally {
            $rpc->close(); // EOF: the fake server ends
        }
        $records = [];
        while (($line = self::readLine($stdout, 10.0)) !== '') {
            $r = \json_decode($line, true, 8, \JSON_THROW_ON_ERROR);
            $r['arg'] = (string) \base64_decode($r['arg'], true);
            $records[] = $r;
        }
        \fclose($stdout);
        // proc_get_status() gives the real exit code only once, on the call that sees the end.
        $deadline = \microtime(true) + 10;
        while (($status = \proc_get_status($proc))['running'] && \microtime(true) < $deadline) {
            \usleep(5000);
        }
        self::assertFalse($status['running'], 'the fake server ended');
        self::assertSame(0, $status['exitcode'], 'fake server stderr: ' . \file_get_contents($this->stderrFile));
        return $records;
    }

    /** @param resource $stream a line, or '' at EOF; fails after $timeout seconds */
    private static function readLine($stream, float $timeout): string
    {
        $r = [$stream];
        $w = $e = null;
        $n = \stream_select($r, $w, $e, (int) $timeout, (int) (($timeout - (int) $timeout) * 1e6));
        self::assertIsInt($n);
        self::assertGreaterThan(0, $n, 'timed out waiting for the fake RPC server');
        $line = \fgets($stream);
        return $line === false ? '' : $line;
    }

    /**
     * @param array{flags: int, options: list<int>, method: string, arg: string} $record
     */
    private static function assertCall(array $record, int $seq, string $method, string $json): void
    {
        self::assertSame(Frame::JSON, $record['flags'], 'JSON codec flag');
        self::assertSame([$seq, \strlen($method)], $record['options'], 'options = [sequence, method length]');
        self::assertSame($method, $record['method']);
        // Same keys in the same order, same types (json_encode's default escaping of "/" aside).
        self::assertSame(
            \json_decode($json, true, 16, \JSON_THROW_ON_ERROR),
            \json_decode($record['arg'], true, 16, \JSON_THROW_ON_ERROR),
            $record['arg'],
        );
    }

    public function testRpcPublishText(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->publish('chat', 'hello');
            $rpc->publish([4 => 'a', 9 => 'b'], 'héllo "/"');
            $rpc->publish('t', '');
        });
        self::assertCount(3, $records);
        self::assertCall($records[0], 1, 'websockets.Publish', '{"topics":["chat"],"message":"hello"}');
        self::assertSame('{"topics":["chat"],"message":"hello"}', $records[0]['arg'], 'the exact bytes');
        self::assertCall($records[1], 2, 'websockets.Publish', '{"topics":["a","b"],"message":"héllo \\"/\\""}');
        self::assertSame(['topics' => ['a', 'b'], 'message' => 'héllo "/"'], \json_decode($records[1]['arg'], true));
        self::assertCall($records[2], 3, 'websockets.Publish', '{"topics":["t"],"message":""}');
    }

    public function testRpcPublishBinaryAndInvalidUtf8GoBase64(): void
    {
        $bytes = "\x00\xff\xfe\x01";
        $records = $this->rpcExchange(static function (Rpc $rpc) use ($bytes): void {
            $rpc->publish(['a', 'b'], $bytes, binary: true);
            $rpc->publish('t', 'valid text', binary: true);
        });
        self::assertCount(2, $records);
        self::assertCall($records[0], 1, 'websockets.Publish', '{"topics":["a","b"],"base64":"AP/+AQ==","binary":true}');
        self::assertSame($bytes, \base64_decode(\json_decode($records[0]['arg'], true)['base64'], true));
        self::assertCall($records[1], 2, 'websockets.Publish',
            '{"topics":["t"],"base64":"' . \base64_encode('valid text') . '","binary":true}');
    }

    public function testRpcRefusesTextThatIsNotUtf8BeforeSendingIt(): void
    {
        $rpc = new Rpc('tcp://127.0.0.1:1'); // never reached: the check comes first
        foreach ([static fn () => $rpc->publish('t', "bad \xc3\x28 utf-8"), static fn () => $rpc->send('1.1', "\xff")] as $call) {
            try {
                $call();
                self::fail('invalid UTF-8 text was accepted');
            } catch (\InvalidArgumentException $e) {
                self::assertStringContainsString('valid UTF-8', $e->getMessage());
            }
        }
    }

    public function testRpcSend(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->send('1.42', 'hi');
            $rpc->send(['1.1', '2.7'], "\x80\x81", binary: true);
            $rpc->send([3 => '4.4'], "\xff", binary: true);
        });
        self::assertCount(3, $records);
        self::assertCall($records[0], 1, 'websockets.Send', '{"to":["1.42"],"message":"hi"}');
        self::assertCall($records[1], 2, 'websockets.Send', '{"to":["1.1","2.7"],"base64":"gIE=","binary":true}');
        self::assertCall($records[2], 3, 'websockets.Send', '{"to":["4.4"],"base64":"/w==","binary":true}');
    }

    public function testRpcCloseConnections(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->closeConnections('1.42');
            $rpc->closeConnections(['1.1', '2.7'], 4000, 'kicked');
            $rpc->closeConnections([5 => '3.3'], 1001, 'server restart');
        });
        self::assertCount(3, $records);
        self::assertCall($records[0], 1, 'websockets.Close', '{"to":["1.42"],"code":1000,"reason":""}');
        self::assertCall($records[1], 2, 'websockets.Close', '{"to":["1.1","2.7"],"code":4000,"reason":"kicked"}');
        self::assertCall($records[2], 3, 'websockets.Close', '{"to":["3.3"],"code":1001,"reason":"server restart"}');
    }

    public function testRpcErrorAnswerBecomesAProtocolExceptionAndTheConnectionStays(): void
    {
        $caught = null;
        $records = $this->rpcExchange(static function (Rpc $rpc) use (&$caught): void {
            try {
                $rpc->closeConnections('1.1', 1005);
            } catch (ProtocolException $e) {
                $caught = $e->getMessage();
            }
            $rpc->publish('after', 'ok'); // same connection, next sequence number
        });
        self::assertSame('websockets.Close: "code" is not a close code a server may send', $caught);
        self::assertCount(2, $records);
        self::assertCall($records[0], 1, 'websockets.Close', '{"to":["1.1"],"code":1005,"reason":""}');
        self::assertCall($records[1], 2, 'websockets.Publish', '{"topics":["after"],"message":"ok"}');
    }

    public function testRpcCallsAgainOnANewConnectionWhenTheKeptOneWasClosedWhileIdle(): void
    {
        $records = $this->rpcExchange(static function (Rpc $rpc): void {
            $rpc->publish('first', 'a');
            \usleep(200000); // the server closes the idle connection meanwhile
            $rpc->publish('second', 'b'); // the kept connection is gone: made again on a new one
        }, dropAfterFirst: true);
        self::assertCount(2, $records, 'the second call reached the server once');
        self::assertCall($records[0], 1, 'websockets.Publish', '{"topics":["first"],"message":"a"}');
        self::assertCall($records[1], 3, 'websockets.Publish', '{"topics":["second"],"message":"b"}');
    }
}
