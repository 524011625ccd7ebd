<?php

// Worker for the fork-template tests (http.pool.fork): tells apart what it booted and who it is now.
//   /         JSON: pid (getmypid() now), boot (the pid that ran the boot code), ppid, pgid, rand (mt_rand())
//   /exit     exit(3) mid-request               /stderr  a line on STDERR naming its pid
//   /sleep?ms=N  sleeps first
//   /exit-hooks?log=FILE&session=DIR[&endob=1][&fatal=1]  what must still run when this worker is stopped:
//             a shutdown function, destructors (objects in a cycle, one held by a static) appending to FILE,
//             an output buffer and a gzip stream (FILE.gz) left open; and a session (files in DIR) left open,
//             which only the engine's own request teardown writes (what http.pool.fork_fast_exit skips);
//             endob=1: the static's destructor closes every output buffer; fatal=1: the shutdown function
//             ends in an uncaught exception; fatal=after: the script ends in one after its loop
// FERRY_TEST_BOOT_LOG: a file that gets one line per boot (the booting pid); FERRY_TEST_BOOT_MS: a slow boot.
declare(strict_types=1);

require __DIR__ . '/../../php-worker/autoload.php';

$bootPid = getmypid();
$log = getenv('FERRY_TEST_BOOT_LOG');
if (is_string($log) && $log !== '') {
    file_put_contents($log, "$bootPid\n", FILE_APPEND);
}
final class ExitHook
{
    public static ?ExitHook $kept = null;
    public static bool $throwAfterLoop = false;
    /** @var resource|null a gzip stream left open: zlib keeps its tail until the stream is closed */
    public static $gz = null;
    public ?ExitHook $peer = null;

    public function __construct(private string $log, private string $what, private bool $endOb = false)
    {
    }

    public function __destruct()
    {
        if ($this->endOb) {
            while (ob_get_level() > 0) {
                ob_end_flush();
            }
        }
        file_put_contents($this->log, "{$this->what} " . getmypid() . "\n", FILE_APPEND);
    }
}

$worker = Ferry\Worker\Worker::create();
usleep(1000 * (int) (getenv('FERRY_TEST_BOOT_MS') ?: 0)); // the application's boot: once per template

while (($req = $worker->waitRequest()) !== null) {
    if ($req->path === '/exit') {
        exit(3);
    }
    if ($req->path === '/exit-hooks') {
        $hookLog = (string) ($req->query['log'] ?? '');
        session_save_path((string) ($req->query['session'] ?? ''));
        session_id('w' . getmypid());
        session_start(['use_cookies' => 0, 'cache_limiter' => '']);
        $_SESSION['pid'] = getmypid();
        $fatal = ($req->query['fatal'] ?? '') === '1';
        ExitHook::$throwAfterLoop = ($req->query['fatal'] ?? '') === 'after';
        register_shutdown_function(static function () use ($hookLog, $fatal): void {
            file_put_contents($hookLog, 'shutdown ' . getmypid() . "\n", FILE_APPEND);
            if ($fatal) {
                throw new RuntimeException('fatal in a shutdown function');
            }
        });
        $a = new ExitHook($hookLog, 'destruct-cycle');
        $a->peer = new ExitHook($hookLog, 'destruct-cycle');
        $a->peer->peer = $a;
        unset($a);
        ExitHook::$kept = new ExitHook($hookLog, 'destruct-static', !empty($req->query['endob']));
        ExitHook::$gz = gzopen("$hookLog.gz", 'wb');
        gzwrite(ExitHook::$gz, 'gz line ' . getmypid() . "\n");
        ob_start();
        echo 'buffered output ', getmypid(), "\n";
    }
    if ($req->path === '/stderr') {
        fwrite(STDERR, 'forked worker stderr ' . getmypid() . "\n");
    }
    if ($req->path === '/sleep') {
        usleep(1000 * max(0, (int) ($req->query['ms'] ?? 0)));
    }
    $worker->respond(200, ['Content-Type' => 'application/json'], json_encode([
        'pid' => getmypid(),
        'boot' => $bootPid,
        'ppid' => posix_getppid(),
        'pgid' => posix_getpgid(0),
        'rand' => mt_rand(),
    ]));
}
if (ExitHook::$throwAfterLoop) {
    throw new RuntimeException('fatal after the loop');
}
