<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests\Support;

use PHPUnit\Framework\Assert;

/** A websockets worker's reply body taken apart as the server takes it (server/src/ws/actions.cpp). */
final class ActionsBody
{
    /**
     * Takes a reply body apart as the server does (server/src/ws/actions.cpp): split at the first NUL,
     * json_decode the first part, give each send/publish its "size" bytes of the rest, in order, and
     * require that the sizes use the rest exactly.
     *
     * @return array{list<array<string, mixed>>, list<string>} the actions and each send/publish's message
     */
    public static function parse(string $body): array
    {
        if ($body === '') {
            return [[], []];
        }
        $nul = \strpos($body, "\0");
        $doc = $nul === false ? $body : \substr($body, 0, $nul);
        $data = $nul === false ? '' : \substr($body, $nul + 1);
        $actions = \json_decode($doc, true, 16, \JSON_THROW_ON_ERROR);
        Assert::assertIsArray($actions);
        Assert::assertTrue(\array_is_list($actions), 'the actions are a JSON list');
        $messages = [];
        $used = 0;
        foreach ($actions as $i => $a) {
            Assert::assertIsArray($a, "action $i is an object");
            Assert::assertIsString($a['do'] ?? null, "action $i has a \"do\"");
            if ($a['do'] === 'send' || $a['do'] === 'publish') {
                Assert::assertIsInt($a['size'] ?? null, "action $i has an integer size");
                Assert::assertGreaterThanOrEqual(0, $a['size']);
                Assert::assertLessThanOrEqual(\strlen($data) - $used, $a['size'], "action $i stays inside the data");
                $messages[] = (string) \substr($data, $used, $a['size']);
                $used += $a['size'];
            }
        }
        Assert::assertSame(\strlen($data), $used, 'the sizes add up to the bytes after the NUL');
        return [$actions, $messages];
    }

    /** The JSON part of a body (before the first NUL). */
    public static function jsonPart(string $body): string
    {
        $nul = \strpos($body, "\0");
        return $nul === false ? $body : \substr($body, 0, $nul);
    }
}
