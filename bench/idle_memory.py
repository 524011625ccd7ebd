#!/usr/bin/env python3
"""Memory Ferry spends per idle keep-alive connection (RSS of the ferry process, workers excluded).

    python3 bench/idle_memory.py [connections]      # default 2000; needs build/ferry

Opens N connections to a ferry serving tests/php/hello.php, measures RSS once they are connected and
again after one request on each (the connection then idles in keep-alive), and prints KiB per connection.
Everything runs on 127.0.0.1 and stops by itself.
"""
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = N + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    with tempfile.TemporaryDirectory(prefix="ferry-mem-") as tmp:
        conf = os.path.join(tmp, "ferry.yaml")
        with open(conf, "w") as f:
            f.write('version: "3"\nserver:\n  command: "php %s/tests/php/hello.php"\n'
                    "http:\n  address: 127.0.0.1:0\n  pool:\n    num_workers: 2\n" % ROOT)
        # The server needs the same file limit: it inherits ours.
        proc = subprocess.Popen([os.path.join(ROOT, "build", "ferry"), "serve", "-c", conf],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            line = proc.stdout.readline().decode()
            if not line.startswith("listening on"):
                sys.exit(f"ferry did not start: {line!r}")
            port = int(line.strip().rsplit(":", 1)[1])
            base = rss_kib(proc.pid)
            socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(N)]
            time.sleep(0.5)
            connected = rss_kib(proc.pid)
            for s in socks:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            for s in socks:
                if b"200 OK" not in s.recv(4096):
                    sys.exit("unexpected answer")
            time.sleep(0.5)
            after = rss_kib(proc.pid)
            print(f"{N} idle connections: {(connected - base) / N:.1f} KiB each when connected, "
                  f"{(after - base) / N:.1f} KiB each after one request (ferry RSS {base} -> {after} KiB)")
            for s in socks:
                s.close()
        finally:
            proc.terminate()
            proc.wait(15)


if __name__ == "__main__":
    main()
