#!/usr/bin/env python3
"""Soak with a leaking worker: Ferry's and its workers' memory stay flat while max_worker_memory recycles.

    python3 bench/soak.py [--minutes 10] [--leak-mb 2] [--limit-mb 64] [--workers 4] [--rate 200]
                          [--bin PATH]

Starts a fresh ferry (`--bin`, default build/ferry) serving tests/php/supervised.php with LEAK_MB (each
request leaks that many megabytes, touched, so resident), `http.pool.supervisor.max_worker_memory`
--limit-mb and /metrics on; `--rate` requests per second from 8 keep-alive client threads, paced, for
`--minutes`. Every 10 s it samples the ferry process's RSS (its own, workers excluded), the largest and
the total worker RSS (/proc), and the /metrics exit counts. Every answer must be 200: a failed request is
counted and reported. Writes bench/results/soak.md (a table per minute and the verdict figures: ferry's
RSS first minute vs last minute, the largest worker RSS seen against the limit) and prints it. Everything
runs on 127.0.0.1 and stops by itself; exit status 0 whatever the figures, 1 if the server failed.
"""
import argparse
import http.client
import os
import re
import sys
import tempfile
import threading
import time

from ferry_bench import children, metrics_text, rss, serve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "php", "supervised.php")
MIB = 1 << 20


def scrape(port):
    text = metrics_text(port)
    exits = {m.group(1): float(m.group(2)) for m in
             re.finditer(r'^ferry_pool_worker_restarts_total\{pool="http",cause="(\w+)"\} (\S+)$', text, re.M)}
    return exits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--leak-mb", type=int, default=2)
    ap.add_argument("--limit-mb", type=int, default=64)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "ferry"))
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="ferry-soak-")
    try:
        proc, port, mport, _ = serve(a.bin, f"""version: "3"
server:
  command: "php {FIXTURE}"
  env: {{LEAK_MB: "{a.leak_mb}"}}
http:
  address: 127.0.0.1:0
  pool:
    num_workers: {a.workers}
    supervisor:
      max_worker_memory: {a.limit_mb}
metrics:
  address: 127.0.0.1:0
""", tmp)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1

    stop = threading.Event()
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    threads = 8
    period = threads / a.rate

    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        nxt = time.monotonic()
        while not stop.is_set():
            try:
                c.request("GET", "/")
                r = c.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            with lock:
                counts["ok" if ok else "failed"] += 1
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()
        c.close()

    pool = [threading.Thread(target=client) for _ in range(threads)]
    for t in pool:
        t.start()
    samples = []  # (t, ferry rss, max worker rss, total worker rss, requests ok, failed, exits by memory)
    started = time.monotonic()
    peak_worker = 0
    try:
        while time.monotonic() - started < a.minutes * 60:
            time.sleep(1)
            ws = [rss(p) for p in children(proc.pid)]
            peak_worker = max([peak_worker] + ws)
            if int(time.monotonic() - started) % 10 == 0 or not samples:
                with lock:
                    ok, failed = counts["ok"], counts["failed"]
                samples.append((time.monotonic() - started, rss(proc.pid), max(ws or [0]), sum(ws), ok, failed,
                                scrape(mport).get("memory", 0)))
            if proc.poll() is not None:
                break
    finally:
        stop.set()
        for t in pool:
            t.join()
    alive = proc.poll() is None
    proc.terminate()
    proc.wait(timeout=60)

    def per_minute():
        rows, minute = [], -1
        for s in samples:
            m = int(s[0] // 60)
            if m != minute:
                minute = m
                rows.append(s)
        rows.append(samples[-1])
        return rows

    first = [s[1] for s in samples if s[0] < 60]
    last = [s[1] for s in samples if s[0] >= samples[-1][0] - 60]
    lines = [
        "# Soak: a leaking worker under max_worker_memory",
        "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {os.cpu_count()} CPUs",
        f"- command: `python3 bench/soak.py --minutes {a.minutes:g} --leak-mb {a.leak_mb} --limit-mb {a.limit_mb} "
        f"--workers {a.workers} --rate {a.rate:g}`",
        f"- tests/php/supervised.php leaking {a.leak_mb} MB per request, {a.workers} workers, max_worker_memory "
        f"{a.limit_mb} MB, {a.rate:g} requests/s paced from 8 keep-alive clients",
        "",
        "| time | ferry RSS | largest worker RSS | all workers' RSS | requests ok | failed | workers recycled (memory) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in per_minute():
        lines.append(f"| {s[0]:.0f} s | {s[1] / MIB:.1f} MiB | {s[2] / MIB:.1f} MiB | {s[3] / MIB:.1f} MiB | {s[4]} | "
                     f"{s[5]} | {s[6]:.0f} |")
    lines += [
        "",
        f"- ferry RSS: {min(first) / MIB:.1f}–{max(first) / MIB:.1f} MiB in the first minute, "
        f"{min(last) / MIB:.1f}–{max(last) / MIB:.1f} MiB in the last",
        f"- largest worker RSS seen (sampled every second): {peak_worker / MIB:.1f} MiB against a limit of "
        f"{a.limit_mb} MiB",
        f"- requests: {samples[-1][4]} answered 200, {samples[-1][5]} failed; the server "
        f"{'ran to the end' if alive else 'EXITED EARLY'}",
    ]
    report = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "soak.md"), "w") as f:
        f.write(report)
    print(report)
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
