<?php

declare(strict_types=1);

namespace Ferry\Worker\Tests;

use Ferry\Laravel\Databases;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\DatabaseManager;
use PHPUnit\Framework\TestCase;

/** Ferry\Laravel\Databases on SQLite files: what a request left open is rolled back; a replaced file is reopened. */
final class LaravelDatabasesTest extends TestCase
{
    private string $dir = '';
    private DatabaseManager $db;

    protected function setUp(): void
    {
        if (!\class_exists(Capsule::class) || !\extension_loaded('pdo_sqlite')) {
            self::markTestSkipped('Laravel and pdo_sqlite are not installed (scripts/setup.sh: php-laravel-framework php-sqlite3)');
        }
        $this->dir = \sys_get_temp_dir() . '/ferry-laravel-db-' . \bin2hex(\random_bytes(4));
        \mkdir($this->dir);
        self::createDatabase($this->dir . '/app.sqlite', 'first');
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'sqlite', 'database' => $this->dir . '/app.sqlite', 'prefix' => '']);
        $this->db = $capsule->getDatabaseManager();
    }

    protected function tearDown(): void
    {
        if ($this->dir !== '') {
            \exec('rm -rf ' . \escapeshellarg($this->dir));
        }
    }

    private static function createDatabase(string $path, string $row): void
    {
        $pdo = new \PDO('sqlite:' . $path);
        $pdo->exec('CREATE TABLE notes (body TEXT)');
        $pdo->exec("INSERT INTO notes VALUES ('{$row}')");
    }

    /** @return list<string> */
    private function notes(): array
    {
        return $this->db->connection()->table('notes')->pluck('body')->all();
    }

    public function testATransactionLeftOpenIsRolledBack(): void
    {
        $databases = new Databases($this->db);
        $connection = $this->db->connection();
        $connection->beginTransaction();
        $connection->beginTransaction();
        $connection->table('notes')->insert(['body' => 'never committed']);
        self::assertSame(2, $connection->transactionLevel());
        $databases->prepare();
        self::assertSame(0, $connection->transactionLevel());
        self::assertSame(['first'], $this->notes());
        // nothing open: nothing changes, the connection is kept
        $pdo = $connection->getPdo();
        $databases->prepare();
        self::assertSame($pdo, $this->db->connection()->getPdo());
    }

    public function testAReplacedSqliteFileIsReopened(): void
    {
        $databases = new Databases($this->db);
        self::assertSame(['first'], $this->notes());
        $databases->remember();
        $databases->prepare();
        $pdo = $this->db->connection()->getPdo();
        self::assertSame(['first'], $this->notes()); // unchanged file: same connection
        self::assertSame($pdo, $this->db->connection()->getPdo());

        self::createDatabase($this->dir . '/new.sqlite', 'second');
        \rename($this->dir . '/new.sqlite', $this->dir . '/app.sqlite');
        self::assertSame(['first'], $this->notes()); // the open PDO still reads the old file
        $databases->prepare();
        self::assertSame(['second'], $this->notes());
        self::assertNotSame($pdo, $this->db->connection()->getPdo());
    }
}
