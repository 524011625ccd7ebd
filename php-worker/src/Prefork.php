<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * The PHP-level fork template (docs/protocol.md §8.1): `http.pool.fork: true` for a worker that is not Ferry's
 * library (RoadRunner's packages, say), which cannot be a template itself. The server starts the worker command
 * with `-d auto_prepend_file=<prefork.php>` (php-worker/prefork.php, written out by the server), so PHP runs this
 * before the worker script. It answers the PID handshake as a template and serves fork commands as ForkTemplate
 * does; each new worker is a fork of a PHP that has started (its extensions, opcache's shared memory) but has
 * run no application code, and it runs the worker script from its first line, as a PHP the server started
 * itself would. A fork saves PHP's own start-up, not the application's boot; with opcache.enable_cli every fork
 * shares the scripts an earlier one compiled (the shared memory is the template's).
 */
final class Prefork
{
    /**
     * Answers the server's handshake and serves fork commands. Returns only in a new worker: the path of the
     * worker script to run (the template exits when the server closes its socket).
     */
    public static function template(): string
    {
        $relay = StreamRelay::stdio();
        try {
            $hello = $relay->receive();
        } catch (ProtocolException $e) {
            self::quit('prefork.php: the handshake is not a frame: ' . $e->getMessage());
        }
        if ($hello === null) {
            self::quit('prefork.php: stdin closed during the handshake');
        }
        $cmd = \json_decode($hello->payload, true, 16);
        if (!$hello->hasFlag(Frame::CONTROL) || !\is_array($cmd) || empty($cmd['template'])
            || !\is_int($cmd['pid'] ?? null) || $cmd['pid'] <= 0) {
            self::quit('prefork.php runs only as the fork template of a Ferry server (it expected '
                . '{"pid":<server pid>,"template":true}, got "' . \addcslashes($hello->payload, "\0..\37\177") . '")');
        }
        $script = self::script();
        $why = $script === null ? 'there is no worker script file to run (php -r, or a script on stdin)'
            : ForkTemplate::unsupported();
        $reply = ['pid' => \getmypid(), 'template' => $why === null];
        if ($why !== null) {
            $reply['why'] = $why;
        }
        try {
            $relay->send(Frame::pack(Frame::CONTROL, \json_encode($reply, \JSON_THROW_ON_ERROR)));
        } catch (ProtocolException) {
            exit(0); // the server is gone
        }
        if ($script === null || $why !== null) {
            exit(0); // the server starts each worker itself from now on
        }
        ForkTemplate::serve($cmd['pid']); // returns in a new worker, on its own pipes
        // What PHP set at its start is the template's; the worker's own start is now.
        $_SERVER['REQUEST_TIME_FLOAT'] = \microtime(true);
        $_SERVER['REQUEST_TIME'] = (int) $_SERVER['REQUEST_TIME_FLOAT'];
        return $script;
    }

    /**
     * The worker script: the first file PHP included (the command's script), or null when there is none (the
     * first is then the prepended file itself).
     */
    private static function script(): ?string
    {
        $first = \get_included_files()[0] ?? null;
        $prepend = \realpath((string) \ini_get('auto_prepend_file'));
        return $first === null || $first === $prepend || !\is_file($first) ? null : $first;
    }

    private static function quit(string $why): never
    {
        \fwrite(\STDERR, $why . "\n");
        exit(2);
    }
}
