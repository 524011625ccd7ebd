<?php

declare(strict_types=1);

namespace Ferry\Laravel;

use Ferry\Worker\Worker;
use Illuminate\Database\Connection;
use Illuminate\Database\DatabaseManager;

/**
 * The database connections a worker keeps between requests, made safe for the next request:
 * - a transaction a failed request left open is rolled back (to level 0), as php-fpm's end of process would;
 * - a connection whose SQLite file was replaced (or removed) since it connected is dropped, so the next query
 *   connects to the file now at that path (a PDO keeps the old file open and would go on reading it);
 * - a connection that fails while rolling back (the server closed it) is dropped and reconnects on next use.
 *   A server that closed a connection with no transaction open is Laravel's own case: its
 *   DetectsLostConnections makes the next query reconnect and retry.
 * The query log and the "records modified" flag are per request.
 */
final class Databases
{
    /** @var array<string, array{int, string}> connection name => [PDO object id, "dev:inode" of its file] */
    private array $files = [];

    public function __construct(private readonly DatabaseManager $db)
    {
    }

    /** Before a request (and after one): the rules above, on every resolved connection. */
    public function prepare(): void
    {
        foreach ($this->db->getConnections() as $name => $connection) {
            $name = (string) $name;
            if ($this->fileReplaced($name, $connection)) {
                Worker::log("ferry laravel: the SQLite file of connection '{$name}' was replaced: reconnecting");
                $this->purge($name);
                continue;
            }
            try {
                if ($connection->transactionLevel() > 0) {
                    Worker::log(\sprintf("ferry laravel: rolling back %d transaction level(s) left open on connection '%s'", $connection->transactionLevel(), $name));
                    $connection->rollBack(0);
                }
            } catch (\Throwable $e) {
                Worker::log("ferry laravel: connection '{$name}' failed ({$e->getMessage()}): reconnecting");
                $this->purge($name);
                continue;
            }
            $connection->forgetRecordModificationState();
            $connection->flushQueryLog();
        }
    }

    /** After a request: notes which file each SQLite connection opened (see prepare()). */
    public function remember(): void
    {
        foreach ($this->db->getConnections() as $name => $connection) {
            $pdo = $connection->getRawPdo();
            if (!$pdo instanceof \PDO || $connection->getDriverName() !== 'sqlite') {
                continue;
            }
            $id = \spl_object_id($pdo);
            if (($this->files[$name][0] ?? null) !== $id) {
                $this->files[(string) $name] = [$id, self::identity((string) $connection->getConfig('database'))];
            }
        }
    }

    private function fileReplaced(string $name, Connection $connection): bool
    {
        if (!isset($this->files[$name])) {
            return false;
        }
        $pdo = $connection->getRawPdo();
        if (!$pdo instanceof \PDO || \spl_object_id($pdo) !== $this->files[$name][0]) {
            return false; // not connected, or reconnected since
        }
        return self::identity((string) $connection->getConfig('database')) !== $this->files[$name][1];
    }

    private function purge(string $name): void
    {
        unset($this->files[$name]);
        $this->db->purge($name);
    }

    /** The file at $path as "device:inode" ("" for none, ":memory:" and the like). */
    private static function identity(string $path): string
    {
        if ($path === '' || $path === ':memory:' || \str_contains($path, 'mode=memory')) {
            return '';
        }
        \clearstatcache(true, $path);
        $stat = @\stat($path);
        return $stat === false ? 'gone' : $stat['dev'] . ':' . $stat['ino'];
    }
}
