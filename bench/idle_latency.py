#!/usr/bin/env python3
"""Latency of a request while many idle keep-alive connections are held (issue 5 item 11).

    python3 bench/idle_latency.py [--idle N] [--seconds S] [--bin PATH]... 

For each ferry binary given (default build/ferry; repeat --bin to compare, e.g. build-before/ferry), runs
`wrk -t1 -c1 --latency` against tests/php/hello.php twice: with no other connection, and with N idle
keep-alive connections held open (default 10000, each after one request). Prints p50/p99 for both. The
binaries run one after the other on the same machine, so only the comparison in one run means anything.
"""
import argparse
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(binary, tmp):
    conf = os.path.join(tmp, "ferry.yaml")
    with open(conf, "w") as f:
        f.write('version: "3"\nserver:\n  command: "php -d opcache.enable_cli=1 %s/tests/php/hello.php"\n'
                "http:\n  address: 127.0.0.1:0\n  timeouts:\n    idle: 10m\n  pool:\n    num_workers: 2\n" % ROOT)
    proc = subprocess.Popen([binary, "serve", "-c", conf], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    if not line.startswith("listening on"):
        proc.kill()
        sys.exit(f"{binary} did not start: {line!r}")
    return proc, int(line.strip().rsplit(":", 1)[1])


def wrk(port, seconds):
    out = subprocess.run(["wrk", "-t1", "-c1", f"-d{seconds}s", "--latency", f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, check=True).stdout
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M))
    rps = re.search(r"Requests/sec:\s+(\S+)", out).group(1)
    return pct.get("50", "?"), pct.get("99", "?"), rps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--bin", action="append")
    args = ap.parse_args()
    bins = args.bin or [os.path.join(ROOT, "build", "ferry")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.idle + 512:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(args.idle + 512, hard), hard))
    print(f"wrk -t1 -c1 -d{args.seconds}s against hello.php (2 workers); {args.idle} idle keep-alive connections "
          f"in the second run")
    for b in bins:
        with tempfile.TemporaryDirectory(prefix="ferry-lat-") as tmp:
            proc, port = start(b, tmp)
            try:
                wrk(port, 1)  # warm-up
                alone = wrk(port, args.seconds)
                socks = []
                for _ in range(args.idle):
                    s = socket.create_connection(("127.0.0.1", port))
                    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                    socks.append(s)
                for s in socks:
                    s.recv(4096)
                time.sleep(1)
                held = wrk(port, args.seconds)
                for s in socks:
                    s.close()
            finally:
                proc.terminate()
                proc.wait(15)
        print(f"{b}: alone p50 {alone[0]} p99 {alone[1]} ({alone[2]} req/s); "
              f"with {args.idle} idle: p50 {held[0]} p99 {held[1]} ({held[2]} req/s)")


if __name__ == "__main__":
    main()
