<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * What the server does after a WebSocket event (docs/protocol.md §9). Encoded as a JSON list of actions,
 * then a NUL byte and the messages' bytes, which the actions take in order ("size"): binary messages need
 * no base64 and text no escaping.
 *
 *     (new WebSocketActions())->join('chat')->publish('chat', "hello", excludeSelf: true)->send('welcome');
 */
final class WebSocketActions
{
    /** @var list<array<string, mixed>> */
    private array $actions = [];
    private string $data = '';

    /**
     * A message to this connection (no $to), or to the connections with these ids (on any event loop); an
     * empty list sends to nobody.
     *
     * @param string|list<string>|null $to
     */
    public function send(string $message, bool $binary = false, string|array|null $to = null): self
    {
        $a = ['do' => 'send', 'size' => \strlen($message)];
        if ($binary) {
            $a['binary'] = true;
        }
        if ($to !== null) {
            $a['to'] = \is_array($to) ? \array_values($to) : [$to];
        }
        $this->actions[] = $a;
        $this->data .= $message;
        return $this;
    }

    /**
     * A message to every connection subscribed to one of the topics (each gets it once).
     *
     * @param string|list<string> $topics
     */
    public function publish(string|array $topics, string $message, bool $binary = false, bool $excludeSelf = false): self
    {
        $a = ['do' => 'publish', 'topics' => self::list($topics), 'size' => \strlen($message)];
        if ($binary) {
            $a['binary'] = true;
        }
        if ($excludeSelf) {
            $a['exclude_self'] = true;
        }
        $this->actions[] = $a;
        $this->data .= $message;
        return $this;
    }

    /** @param string|list<string> $topics */
    public function join(string|array $topics): self
    {
        $this->actions[] = ['do' => 'join', 'topics' => self::list($topics)];
        return $this;
    }

    /** @param string|list<string> $topics */
    public function leave(string|array $topics): self
    {
        $this->actions[] = ['do' => 'leave', 'topics' => self::list($topics)];
        return $this;
    }

    /**
     * Closes this connection (no $to) or those with these ids: a close frame with the code and reason.
     *
     * @param string|list<string>|null $to
     */
    public function close(int $code = 1000, string $reason = '', string|array|null $to = null): self
    {
        $a = ['do' => 'close', 'code' => $code, 'reason' => $reason];
        if ($to !== null) {
            $a['to'] = \is_array($to) ? \array_values($to) : [$to];
        }
        $this->actions[] = $a;
        return $this;
    }

    /** Attaches a string to this connection: every later event of it carries it (WebSocketEvent::$data). */
    public function data(string $value): self
    {
        $this->actions[] = ['do' => 'data', 'value' => $value];
        return $this;
    }

    public function isEmpty(): bool
    {
        return $this->actions === [];
    }

    /**
     * The reply body. An action that cannot be encoded (a topic, id, close reason or data value that is not
     * valid UTF-8, or a text message that is not) is left out with a line on stderr (the worker's log); the
     * other actions go on, and the worker keeps serving: bytes a client sent must not end it.
     */
    public function encode(): string
    {
        if ($this->actions === []) {
            return '';
        }
        $json = [];
        $data = '';
        $offset = 0;
        foreach ($this->actions as $i => $action) {
            $message = '';
            if (isset($action['size'])) {
                $message = \substr($this->data, $offset, $action['size']);
                $offset += $action['size'];
            }
            try {
                if (isset($action['size']) && empty($action['binary']) && \preg_match('//u', $message) !== 1) {
                    throw new \JsonException('its text message is not valid UTF-8 (send bytes with binary: true)');
                }
                $json[] = \json_encode($action, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE | \JSON_THROW_ON_ERROR);
            } catch (\JsonException $e) {
                self::log(\sprintf('ferry-worker: dropped WebSocket action #%d ("%s"): %s', $i + 1, $action['do'], $e->getMessage()));
                continue;
            }
            $data .= $message;
        }
        $body = '[' . \implode(',', $json) . ']';
        return $data === '' ? $body : $body . "\0" . $data;
    }

    private static function log(string $line): void
    {
        $stderr = \defined('STDERR') ? \STDERR : \fopen('php://stderr', 'wb');
        \fwrite($stderr, $line . "\n");
    }

    /**
     * @param string|list<string> $topics
     * @return list<string>
     */
    private static function list(string|array $topics): array
    {
        return \is_array($topics) ? \array_values($topics) : [$topics];
    }
}
