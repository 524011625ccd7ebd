<?php

declare(strict_types=1);

namespace Ferry\Worker;

/**
 * The fork template (docs/protocol.md §8; the server's `http.pool.fork: true`): this process booted the
 * application once and never serves a request; the server asks it for new workers, and each one is a fork of
 * it, so a worker recycled by max_jobs costs a fork (about a millisecond), not a PHP boot.
 *
 * The server starts the template with a unix socket on fd 3 and asks for a template in its PID frame. At the
 * first waitRequest() the template enters serve(): each fork command arrives on that socket with three
 * descriptors (SCM_RIGHTS:
 * the new worker's stdin, stdout and stderr). The template forks once with the server as the new worker's
 * parent (clone(2) with CLONE_PARENT; where that system call is not known or refused, it forks twice and the
 * middle process dies at once, so the worker is re-parented to the server, a child subreaper); the server reaps
 * it like any worker. The template replies with the worker's pid and goes on waiting. The new worker puts the
 * three descriptors on 0, 1 and 2 (FFI dup2, so STDIN/STDOUT/STDERR and PHP's own error output are its own
 * pipes), takes its own process group, dies with the server (PR_SET_PDEATHSIG), reseeds mt_rand, and continues
 * as a fresh worker from waitRequest(): the same handshake as a worker the server started itself.
 *
 * Whatever the application opened before its first waitRequest() (a database connection, a socket) is shared by
 * every fork: open such things lazily, on the first request.
 */
final class ForkTemplate
{
    private const SIGKILL = 9;
    private const SIGCHLD = 17;
    private const PR_SET_PDEATHSIG = 1;
    private const CLONE_PARENT = 0x00008000;

    /** The server's control socket. */
    private const CONTROL_FD = 3;
    private const S_IFMT = 0170000;
    private const S_IFSOCK = 0140000;

    /** @var \Socket|null the server's control socket (closed in a new worker) */
    private static ?\Socket $socket = null;

    /**
     * clone(2)'s system call number while one fork per worker is on (CLONE_PARENT); 0 when it is off (the
     * number is not known here, a clone failed once, or FERRY_FORK_ONCE=0); null until the first fork.
     */
    private static ?int $cloneNumber = null;

    /** In a forked worker whose fork command asked for it (`fast_exit`): end with _exit(0) once stopped. */
    private static bool $fastExit = false;

    /** Why this PHP cannot be a template, or null when it can. */
    public static function unsupported(): ?string
    {
        foreach (['pcntl_fork', 'posix_setpgid', 'socket_import_stream', 'socket_recvmsg'] as $fn) {
            if (!\function_exists($fn)) {
                return "$fn() is not available (ext-pcntl, ext-posix and ext-sockets are needed)";
            }
        }
        if (!\class_exists(\FFI::class)) {
            return 'ext-ffi is not loaded (needed for dup2 and prctl in the forked worker)';
        }
        try {
            self::libc();
        } catch (\Throwable $e) {
            return 'FFI cannot load libc (ffi.enable=' . \ini_get('ffi.enable') . '): ' . $e->getMessage();
        }
        $f = @\fopen('php://fd/' . self::CONTROL_FD, 'r'); // a duplicate, to look at it
        $st = $f === false ? false : \fstat($f);
        if ($f !== false) {
            \fclose($f);
        }
        if ($st === false || ($st['mode'] & self::S_IFMT) !== self::S_IFSOCK) {
            return 'fd ' . self::CONTROL_FD . ' is not the server\'s control socket';
        }
        return null;
    }

    /**
     * Serves fork commands until the server closes the socket (exit 0). Returns only in a new worker.
     *
     * @param int $serverPid the server's pid (from its PID frame): the new worker's parent once re-parented
     */
    public static function serve(int $serverPid): void
    {
        $ctl = @\fopen('php://fd/' . self::CONTROL_FD, 'r+'); // a duplicate of fd 3
        $sock = $ctl === false ? false : @\socket_import_stream($ctl);
        if ($sock === false) {
            self::log('ferry template: fd ' . self::CONTROL_FD . ' is not a socket; cannot receive fork commands');
            exit(2);
        }
        self::libc()->close(self::CONTROL_FD); // the duplicate is enough
        self::$socket = $sock;
        $space = \socket_cmsg_space(\SOL_SOCKET, \SCM_RIGHTS, 3);
        for (;;) {
            $msg = ['name' => [], 'buffer_size' => 4096, 'controllen' => $space];
            $n = @\socket_recvmsg($sock, $msg, 0);
            if ($n === false) {
                $errno = \socket_last_error($sock);
                if ($errno === \SOCKET_EINTR) {
                    continue;
                }
                self::log('ferry template: reading a command failed: ' . \socket_strerror($errno));
                exit(2);
            }
            $fds = [];
            foreach ($msg['control'] ?? [] as $cmsg) {
                if ($cmsg['level'] === \SOL_SOCKET && $cmsg['type'] === \SCM_RIGHTS) {
                    foreach ($cmsg['data'] as $fd) {
                        $fds[] = $fd;
                    }
                }
            }
            $bytes = (string) ($msg['iov'][0] ?? '');
            if ($n === 0 || $bytes === '') {
                exit(0); // the server stopped us, or is gone
            }
            if (self::command($bytes, $fds, $serverPid)) {
                return; // this process is the new worker
            }
        }
    }

    /**
     * One command: true in the new worker, false in the template (which has replied).
     *
     * @param list<resource|\Socket> $fds
     */
    private static function command(string $bytes, array $fds, int $serverPid): bool
    {
        try {
            $h = Frame::parseHeader(\substr($bytes, 0, Frame::HEADER_SIZE));
            $payload = (string) \substr($bytes, Frame::HEADER_SIZE + 4 * $h['options'], $h['length']);
            $cmd = \json_decode($payload, true, 16, \JSON_THROW_ON_ERROR);
        } catch (\Throwable $e) {
            self::closeAll($fds);
            self::reply(null, 'bad command: ' . $e->getMessage());
            return false;
        }
        if (!\is_array($cmd) || empty($cmd['fork'])) {
            self::closeAll($fds);
            self::reply(null, 'unknown command ' . $payload);
            return false;
        }
        if (\count($fds) !== 3 || !\is_resource($fds[0]) || !\is_resource($fds[1]) || !\is_resource($fds[2])) {
            self::closeAll($fds);
            self::reply(null, \sprintf('a fork command needs 3 pipe descriptors, got %d', \count($fds)));
            return false;
        }
        // One fork, the server as the worker's parent: measured on the benchmark VM, the middle process of two
        // forks (its page tables copied and torn down) cost ~9 ms of serving per new worker (bench/results/
        // 2026-12-05-fork-swap-trace.md).
        $pid = self::forkToParent($serverPid);
        if ($pid === 0) {
            self::becomeWorker($fds, $serverPid);
            self::$fastExit = !empty($cmd['fast_exit']);
            return true;
        }
        if ($pid !== null) {
            self::closeAll($fds);
            self::reply($pid, null);
            return false;
        }
        $pair = \stream_socket_pair(\STREAM_PF_UNIX, \STREAM_SOCK_STREAM, \STREAM_IPPROTO_IP);
        if ($pair === false) {
            self::closeAll($fds);
            self::reply(null, 'socketpair failed');
            return false;
        }
        $middle = \pcntl_fork();
        if ($middle === -1) {
            \fclose($pair[0]);
            \fclose($pair[1]);
            self::closeAll($fds);
            self::reply(null, 'fork failed: ' . \pcntl_strerror(\pcntl_get_last_error()));
            return false;
        }
        if ($middle === 0) {
            // The middle process: fork the worker, tell the template its pid, die without PHP's shutdown.
            \fclose($pair[0]);
            $pid = \pcntl_fork();
            if ($pid === 0) {
                \fclose($pair[1]);
                self::becomeWorker($fds, $serverPid);
                self::$fastExit = !empty($cmd['fast_exit']);
                return true;
            }
            \fwrite($pair[1], \pack('l', $pid));
            \posix_kill(\posix_getpid(), self::SIGKILL);
            exit(1); // not reached
        }
        \fclose($pair[1]);
        $got = (string) \stream_get_contents($pair[0]);
        \fclose($pair[0]);
        self::closeAll($fds);
        \pcntl_waitpid($middle, $status);
        $pid = \strlen($got) === 4 ? \unpack('l', $got)[1] : -1;
        if ($pid <= 0) {
            self::reply(null, 'the second fork failed');
            return false;
        }
        self::reply($pid, null);
        return false;
    }

    /**
     * The server stopped this worker (its stop frame). In a forked worker with `fast_exit` (docs/protocol.md
     * §8, `http.pool.fork_fast_exit`), the process then ends with _exit(0) once PHP's request shutdown has
     * run the shutdown functions and the destructors and flushed the output buffers, skipping the engine's
     * teardown: freeing the tables it inherited from the template would copy nearly every page of the
     * template's heap (copy-on-write) only to free it in a process that is about to end. Open streams are
     * closed first (a gzip stream's tail is written on close). Not after a fatal error (its exit status is
     * kept), and not when the output guard is gone by then (the usual exit).
     */
    public static function serverStopped(): void
    {
        if (!self::$fastExit) {
            return;
        }
        self::$fastExit = false;
        // Registered from a shutdown function, it runs after every other one, the application's included.
        \register_shutdown_function(static function (): void {
            \register_shutdown_function(static function (): void {
                $err = \error_get_last();
                $fatal = \E_ERROR | \E_PARSE | \E_CORE_ERROR | \E_COMPILE_ERROR | \E_USER_ERROR | \E_RECOVERABLE_ERROR;
                if ($err !== null && ($err['type'] & $fatal) !== 0) {
                    return;
                }
                $libc = self::libc();
                StdoutGuard::exitAtEnd(static function () use ($libc): void {
                    // Streams still open would be closed by the teardown: a buffering one (zlib, bzip2, a
                    // user wrapper, a filter) writes its tail only then.
                    foreach (\get_resources('stream') as $stream) {
                        if ($stream !== \STDIN && $stream !== \STDOUT && $stream !== \STDERR) {
                            @\fclose($stream);
                        }
                    }
                    $libc->_exit(0);
                });
            });
        });
    }

    /** @param list<resource|\Socket> $fds stdin, stdout, stderr of the new worker */
    private static function becomeWorker(array $fds, int $serverPid): void
    {
        $libc = self::libc();
        $targets = self::descriptorNumbers($fds);
        foreach ($targets as $i => $fd) {
            if ($fd < 0 || $libc->dup2($fd, $i) !== $i) {
                exit(2); // nothing to report on: stdout is not ours yet
            }
        }
        self::closeAll($fds);
        if (self::$socket !== null) {
            \socket_close(self::$socket); // the template's control socket is not the worker's
            self::$socket = null;
        }
        \posix_setpgid(0, 0);
        // The server's child already (one fork), or once re-parented to it (two forks: when the middle process
        // is gone): from now on die with it.
        for ($i = 0; $i < 20000 && \posix_getppid() !== $serverPid; ++$i) {
            \usleep(50);
        }
        $libc->prctl(self::PR_SET_PDEATHSIG, self::SIGKILL, 0, 0, 0);
        if (\posix_getppid() !== $serverPid) {
            exit(1); // the server went away meanwhile
        }
        \mt_srand();
    }

    /**
     * The descriptor numbers of the received streams (PHP does not show them): matched by device and inode
     * against /proc/self/fd.
     *
     * @param list<resource> $streams
     * @return list<int> -1 where not found
     */
    private static function descriptorNumbers(array $streams): array
    {
        $want = [];
        foreach ($streams as $i => $s) {
            $st = \fstat($s);
            $want[$i] = $st === false ? null : $st['dev'] . ':' . $st['ino'];
        }
        $out = \array_fill(0, \count($streams), -1);
        foreach (\scandir('/proc/self/fd') ?: [] as $name) {
            if (\preg_match('/^[0-9]+$/D', $name) !== 1 || (int) $name < 3) { // not ctype: an optional extension
                continue;
            }
            $st = @\stat('/proc/self/fd/' . $name);
            if ($st === false) {
                continue;
            }
            $key = $st['dev'] . ':' . $st['ino'];
            foreach ($want as $i => $k) {
                if ($k === $key && $out[$i] === -1) {
                    $out[$i] = (int) $name;
                    break;
                }
            }
        }
        return $out;
    }

    /**
     * Forks once with this process's parent, the server ($serverPid), as the child's parent: clone(2) with
     * CLONE_PARENT and SIGCHLD, no new stack (a copy-on-write copy of this one, as fork() makes). The child's
     * pid here, 0 in the child, null when it cannot be done here: this process's parent is not the server (a
     * command run through a shell that forks it, say: the worker would be the shell's child), the system call
     * number is not known on this architecture, the call was refused (a seccomp filter, say), or
     * FERRY_FORK_ONCE=0. The caller then forks twice, and the server adopts the worker. Not glibc's fork(),
     * so no atfork handler runs in the child: a single-threaded template holds no lock they would release, and
     * glibc's raise() and getpid() ask the kernel, not a cache.
     */
    public static function forkToParent(int $serverPid): ?int
    {
        self::$cloneNumber ??= self::cloneNumber();
        if (self::$cloneNumber === 0 || \posix_getppid() !== $serverPid) {
            return null;
        }
        // The arguments after the flags (stack, parent tid, child tid, tls) are all 0, so their order, which
        // differs between architectures, does not matter.
        $pid = (int) self::libc()->syscall(self::$cloneNumber, self::CLONE_PARENT | self::SIGCHLD, 0, 0, 0, 0);
        if ($pid < 0) {
            self::$cloneNumber = 0;
            self::log('ferry template: clone(CLONE_PARENT) failed; forking twice from now on');
            return null;
        }
        return $pid;
    }

    /**
     * clone(2)'s system call number on this machine; 0 where this library does not know it or FERRY_FORK_ONCE
     * is 0. A value other than 0 or 1 is said on stderr and ignored.
     */
    private static function cloneNumber(): int
    {
        $env = \getenv('FERRY_FORK_ONCE');
        if ($env === '0') {
            return 0;
        }
        if ($env !== false && $env !== '' && $env !== '1') {
            self::log("ferry template: FERRY_FORK_ONCE must be 0 or 1 (got '" . \addcslashes($env, "\0..\37\177") .
                "'); forking once where it can");
        }
        return match (\php_uname('m')) {
            'x86_64', 'amd64' => 56,
            'aarch64', 'arm64' => 220,
            default => 0,
        };
    }

    private static function libc(): \FFI
    {
        static $libc = null;
        return $libc ??= \FFI::cdef(
            'int dup2(int oldfd, int newfd); int close(int fd); void _exit(int status); ' .
            'int prctl(int option, unsigned long a, unsigned long b, ' .
            'unsigned long c, unsigned long d); long syscall(long number, ...);',
            'libc.so.6',
        );
    }

    private static function reply(?int $pid, ?string $error): void
    {
        $frame = $error !== null
            ? Frame::pack(Frame::ERROR, $error)
            : Frame::pack(Frame::CONTROL, \json_encode(['pid' => $pid], \JSON_THROW_ON_ERROR));
        $n = @\fwrite(\STDOUT, $frame);
        if ($n !== \strlen($frame)) {
            exit(2); // the server is gone
        }
    }

    /** @param list<resource|\Socket> $fds */
    private static function closeAll(array $fds): void
    {
        foreach ($fds as $fd) {
            if (\is_resource($fd)) {
                \fclose($fd);
            } elseif ($fd instanceof \Socket) {
                \socket_close($fd);
            }
        }
    }

    private static function log(string $line): void
    {
        \fwrite(\STDERR, $line . "\n");
    }
}
