<?php

namespace App\Service;

use Symfony\Contracts\Service\ResetInterface;

/**
 * The notes of the example, in SQLite (var/notes.sqlite, created on first use). A long-lived worker keeps
 * its connection between requests; reset() (kernel.reset, before the next request) applies the two rules a
 * long-lived worker needs: a transaction a failed request left open is rolled back, and a connection to a
 * database file that was replaced (or removed) meanwhile is dropped, to be opened again on next use.
 */
class Notes implements ResetInterface
{
    private ?\PDO $pdo = null;
    private ?int $inode = null;

    public function __construct(private string $file)
    {
    }

    /** @return list<array{id: int, text: string}> */
    public function all(): array
    {
        return array_map(
            fn (array $r) => ['id' => (int) $r['id'], 'text' => $r['text']],
            $this->db()->query('SELECT id, text FROM notes ORDER BY id')->fetchAll(\PDO::FETCH_ASSOC)
        );
    }

    public function add(string $text): void
    {
        $this->db()->prepare('INSERT INTO notes (text) VALUES (?)')->execute([$text]);
    }

    /** Begins a transaction, inserts, and fails before committing (the route that shows the rollback rule). */
    public function addThenFail(string $text): void
    {
        $this->db()->beginTransaction();
        $this->add($text);
        throw new \RuntimeException('failed in the middle of a transaction');
    }

    public function inTransaction(): bool
    {
        return $this->pdo !== null && $this->pdo->inTransaction();
    }

    public function reset(): void
    {
        if ($this->pdo === null) {
            return;
        }
        if ($this->pdo->inTransaction()) {
            $this->pdo->rollBack();
        }
        clearstatcache(true, $this->file);
        $inode = @fileinode($this->file);
        if ($inode === false || $inode !== $this->inode) {
            $this->pdo = null; // replaced or removed: a new connection on next use
        }
    }

    private function db(): \PDO
    {
        if ($this->pdo === null) {
            if (!is_dir(dirname($this->file))) {
                mkdir(dirname($this->file), 0777, true);
            }
            $this->pdo = new \PDO('sqlite:'.$this->file, null, null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]);
            $this->pdo->exec('CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL)');
            clearstatcache(true, $this->file);
            $this->inode = fileinode($this->file) ?: null;
        }
        return $this->pdo;
    }
}
