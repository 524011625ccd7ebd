"""A real redis-server (Debian's redis-server) on a free loopback port, without persistence, for the broker's
tests (test_broker.py) and bench/cluster.sh: started, killed and started again on the same port."""

import os
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    def __init__(self, password=None, port=None):
        if shutil.which("redis-server") is None:
            raise AssertionError("redis-server is not installed (scripts/setup.sh installs it)")
        self.port = port or free_port()
        self.password = password
        self.proc = None
        self.dir = tempfile.TemporaryDirectory(prefix="ferry-redis-")

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=10.0):
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning",
                "--dir", self.dir.name]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=self.dir.name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.command("PING") in ("PONG", "NOAUTH Authentication required."):
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise AssertionError("redis-server did not answer PING")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def close(self):
        self.kill()
        self.dir.cleanup()

    def command(self, *args):
        """One command on a fresh connection (AUTH first with a password): the reply, simply decoded."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            cmds = ([("AUTH", self.password)] if self.password else []) + [args]
            s.sendall(b"".join(encode(c) for c in cmds))
            f = s.makefile("rb")
            reply = None
            for _ in cmds:
                reply = read_reply(f)
            return reply


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(f):
    line = f.readline()
    if not line:
        raise OSError("redis closed the connection")
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [read_reply(f) for _ in range(n)]
    raise OSError(f"not RESP: {line!r}")
