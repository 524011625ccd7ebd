<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Worker\Tests\Support\ActionsBody;
use Ferry\Worker\WebSocketActions;
use PHPUnit\Framework\TestCase;

/** docs/protocol.md §9: WebSocketActions::encode(), the body a websockets worker answers with. */
final class WebSocketActionsTest extends TestCase
{
    // ---------------------------------------------------------------- WebSocketActions::encode()

    public function testNoActionsEncodeToAnEmptyBody(): void
    {
        $a = new WebSocketActions();
        self::assertTrue($a->isEmpty());
        self::assertSame('', $a->encode());
        self::assertSame([[], []], ActionsBody::parse($a->encode()));
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
        [$actions, $messages] = ActionsBody::parse($a->encode());
        self::assertSame([
            ['do' => 'send', 'size' => 5],
            ['do' => 'send', 'size' => 6, 'to' => ['2.7']],
            ['do' => 'send', 'size' => 7, 'to' => ['1.1', '4.2']],
            ['do' => 'send', 'size' => 5, 'binary' => true],
            ['do' => 'send', 'size' => 10, 'to' => ['self']],
        ], $actions);
        self::assertSame(['to me', 'to one', 'to many', "\x00\xffbin", 'not binary'], $messages);
        self::assertStringNotContainsString('"binary":false', ActionsBody::jsonPart($a->encode()), 'binary only when true');
    }

    public function testPublishShapes(): void
    {
        $a = (new WebSocketActions())
            ->publish('news', 'one')
            ->publish(['a', 'b'], 'two', excludeSelf: true)
            ->publish([5 => 'x'], "\xfe\x00", binary: true)
            ->publish('t', 'three', binary: true, excludeSelf: true);
        [$actions, $messages] = ActionsBody::parse($a->encode());
        self::assertSame([
            ['do' => 'publish', 'topics' => ['news'], 'size' => 3],
            ['do' => 'publish', 'topics' => ['a', 'b'], 'size' => 3, 'exclude_self' => true],
            ['do' => 'publish', 'topics' => ['x'], 'size' => 2, 'binary' => true],
            ['do' => 'publish', 'topics' => ['t'], 'size' => 5, 'binary' => true, 'exclude_self' => true],
        ], $actions);
        self::assertSame(['one', 'two', "\xfe\x00", 'three'], $messages);
        self::assertStringNotContainsString('false', ActionsBody::jsonPart($a->encode()));
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
        [$actions, $messages] = ActionsBody::parse($body);
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
        [$actions, $messages] = ActionsBody::parse($body);
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
        $json = ActionsBody::jsonPart($body);
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
        $json = ActionsBody::jsonPart($body);
        self::assertStringContainsString('\\u0000', $json);
        self::assertSame('m', \substr($body, \strlen($json) + 1));
        [$actions, $messages] = ActionsBody::parse($body);
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
        [$actions, $messages] = ActionsBody::parse($body);
        self::assertSame([0, 0, 0], \array_column(\array_filter($actions, static fn (array $x): bool => isset($x['size'])), 'size'));
        self::assertSame(['', '', ''], $messages);

        // One non-empty message brings the NUL back, and the empty ones still take 0 bytes.
        $body = $a->send('z')->encode();
        self::assertSame(1, \substr_count($body, "\0"));
        self::assertStringEndsWith("\0z", $body);
        self::assertSame(['', '', '', 'z'], ActionsBody::parse($body)[1]);
    }

    public function testEncodeCanBeCalledAgainAndKeepsAddingInOrder(): void
    {
        $a = (new WebSocketActions())->send('one');
        $first = $a->encode();
        self::assertSame($first, $a->encode(), 'encode() does not consume');
        $a->send('two');
        self::assertSame(['one', 'two'], ActionsBody::parse($a->encode())[1]);
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
        [$actions, $messages] = ActionsBody::parse($body);
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
        self::assertSame([[], []], ActionsBody::parse($body));
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
}
