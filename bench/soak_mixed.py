#!/usr/bin/env python3
"""The driver of bench/soak.sh (run that): one ferry under mixed traffic at about half its saturating rate
for --minutes, with leaking workers (max_worker_memory recycles them), a crashing route now and then and a
rolling reset of both pools every --reset-every seconds; a row of figures every minute, a verdict at the end
(bench/results/soak-<date>.md).

Traffic (bench/soak_traffic.py), all on 127.0.0.1: --keepalive paced keep-alive clients and --fresh paced
clients opening a connection per request, over GET /, static files (http.static), urlencoded forms,
multipart uploads, raw bodies past body_buffer_size (temp files) and /leak (--leak-kb kept per request);
GET /crash (exit mid-request, 502 expected, counted apart) every --crash-every s; --chat WebSocket chat
clients on topic "chat" (publish, read, leave and come back), one stalled receiver that never reads (of
"chat" and of "bulk", where --bulk-kbps are published), --sse server-sent events readers of "chat". The paced
rate is --rate, or half of what --saturate-threads keep-alive clients get from GET / in --saturate-seconds
when --rate is 0.

Every 5 s: the ferry process's RSS (workers excluded), open descriptors, threads, temp files (named files in
uploads.dir and in the server's TMPDIR, and descriptors ferry holds on them). Every minute a row: those
(RSS median, descriptors min–max, temp files max), requests, non-2xx (crash route apart), p50/p99, WebSocket
and SSE figures, workers recycled, resets. Verdict: after --warmup minutes, RSS (minute medians) and
descriptors (minute minimum) of the last row against the first within 5 %, no non-2xx but the crashes'
502s, no temp file left after the traffic stopped and after the server exited.

Exit status: 0 every goal met, 2 a goal missed, 1 the server failed.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import soak_traffic as tr
from ferry_bench import children, metrics_text, rss, serve, stop as stop_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
SAMPLE_EVERY = 5
BULK_SIZE = 16000  # bytes per message to topic "bulk"


def config(a, d):
    return f"""version: "3"
server:
  command: "php -d opcache.enable=1 -d opcache.enable_cli=1 {ROOT}/bench/php/soak.php"
http:
  address: 127.0.0.1:0
  middleware: ["static"]
  static:
    dir: {d['www']}
  uploads:
    dir: {d['uploads']}
  limits:
    body_buffer_size: 64KB
  pool:
    num_workers: {a.workers}
    supervisor:
      max_worker_memory: {a.limit_mb}
websockets:
  path: /ws
  sse_path: /events
  pool:
    num_workers: 2
rpc:
  listen: unix://{d['tmp']}/rpc.sock
metrics:
  address: 127.0.0.1:0
"""


def static_files(www):
    """Three files under www/static/; returns {URL path: size}."""
    os.makedirs(os.path.join(www, "static"))
    files = {}
    for name, size in (("small.txt", 1 << 10), ("page.css", 32 << 10), ("image.bin", 300 << 10)):
        with open(os.path.join(www, "static", name), "wb") as f:
            f.write(os.urandom(size))
        files[f"/static/{name}"] = size
    return files


class Probe:
    """Samples of the ferry process, and the temp files it made, every SAMPLE_EVERY seconds."""

    def __init__(self, pid, dirs):
        self.pid, self.dirs = pid, dirs
        self.samples = []  # dicts, each with "t"

    def temp_named(self):
        # Not the lock file a running server keeps in uploads.dir (ferry-upload-<pid>-<tag>.lock): it is no
        # temp file, and it goes when the server stops.
        n = sum(1 for f in os.listdir(self.dirs["uploads"]) if not f.endswith(".lock"))
        return n + sum(1 for f in os.listdir(self.dirs["tmpdir"]) if f.startswith("ferry-"))

    def temp_open(self):
        """Descriptors of ferry's on files in uploads.dir or its TMPDIR (O_TMPFILE ones included)."""
        n = 0
        fd_dir = f"/proc/{self.pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target.endswith(".lock"):  # the uploads lock (see temp_named)
                continue
            n += target.startswith(self.dirs["uploads"] + "/") or target.startswith(self.dirs["tmpdir"] + "/")
        return n

    def take(self, t):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                threads = int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))
            s = {"t": t, "rss": rss(self.pid), "fds": len(os.listdir(f"/proc/{self.pid}/fd")), "threads": threads,
                 "temp": self.temp_named() + self.temp_open(),
                 "worker_rss": max([rss(p) for p in children(self.pid)] or [0])}
        except (OSError, AttributeError):
            return None
        self.samples.append(s)
        return s


def restarts(mport):
    """{(pool, cause): count} from /metrics ({} when it does not answer)."""
    try:
        text = metrics_text(mport)
    except OSError:
        return {}
    return {(m.group(1), m.group(2)): float(m.group(3)) for m in
            re.finditer(r'^ferry_pool_worker_restarts_total\{pool="(\w+)",cause="(\w+)"\} (\S+)$', text, re.M)}


def resetter(binary, cfg, stop, every, log):
    """`ferry reset` of the http pool, then of the websockets pool, every `every` s (the first at half)."""
    wait = every / 2
    while not stop.wait(wait):
        t0 = time.monotonic()
        for pool in ("http", "websockets"):
            try:
                r = subprocess.run([binary, "reset", "-c", cfg, pool], capture_output=True, text=True, timeout=180)
                rc, err = r.returncode, r.stderr.strip()[-200:]
            except subprocess.TimeoutExpired:
                rc, err = "timeout", ""
            log.append((time.monotonic(), pool, rc, time.monotonic() - t0, err))
        wait = max(1.0, every - (time.monotonic() - t0))


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def minute_row(minute, stats, samples, rst, resets, rate):
    lat, ws = stats["lat"], stats["ws_lat"]
    return {
        "minute": minute, "rss": statistics.median(s["rss"] for s in samples) if samples else 0,
        "fds_min": min((s["fds"] for s in samples), default=0), "fds_max": max((s["fds"] for s in samples), default=0),
        "threads": max((s["threads"] for s in samples), default=0),
        "temp": max((s["temp"] for s in samples), default=0),
        "worker_rss": max((s["worker_rss"] for s in samples), default=0),
        "ok": stats["ok"], "rate": len(lat) / 60, "target": rate, "non2xx": sum(stats["non2xx"].values()),
        "non2xx_by": stats["non2xx"], "wrong": stats["wrong"], "errors": sum(stats["errors"].values()),
        "errors_by": stats["errors"], "crash502": stats["crash502"], "p50": pct(lat, 0.5) * 1e3,
        "p99": pct(lat, 0.99) * 1e3, "ws": (stats["ws_sent"], stats["ws_recv"], pct(ws, 0.99) * 1e3,
                                            stats["ws_conns"], stats["ws_lost"]),
        "sse": (stats["sse_events"], stats["sse_conns"], stats["sse_lost"]),
        "stalled": stats["stalled_conns"],
        "recycled": rst, "resets": resets,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "ferry"))
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=None, help="minutes left out of the verdict "
                    "(default: a sixth of the run, 1 to 5)")
    ap.add_argument("--rate", type=float, default=0, help="paced HTTP requests/s (0: half the saturating rate)")
    ap.add_argument("--saturate-seconds", type=float, default=5)
    ap.add_argument("--saturate-threads", type=int, default=8)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--leak-kb", type=int, default=0, help="KB kept by each /leak request (0: sized so that "
                    "each worker reaches --limit-mb in about --recycle-every s)")
    ap.add_argument("--recycle-every", type=float, default=15)
    ap.add_argument("--limit-mb", type=int, default=48)
    ap.add_argument("--crash-every", type=float, default=10)
    ap.add_argument("--reset-every", type=float, default=60)
    ap.add_argument("--keepalive", type=int, default=6)
    ap.add_argument("--fresh", type=int, default=2)
    ap.add_argument("--chat", type=int, default=6)
    ap.add_argument("--sse", type=int, default=3)
    ap.add_argument("--bulk-kbps", type=float, default=192, help="KiB/s published to topic \"bulk\", which only "
                    "the stalled receiver joined: the kernel's buffers (~3 MB) and its queue in the server "
                    "(websockets.max_queue_bytes, 4 MB) fill within the first minute")
    ap.add_argument("--tmp", default=None, help="work directory (default: a new one, removed at the end)")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--command", default="bench/soak.sh", help="the command line written in the report")
    a = ap.parse_args()
    warmup = a.warmup if a.warmup is not None else min(5, max(1, int(a.minutes // 6)))

    own_tmp = a.tmp is None
    tmp = a.tmp or tempfile.mkdtemp(prefix="ferry-soak-")
    d = {"tmp": tmp, "www": os.path.join(tmp, "www"), "uploads": os.path.join(tmp, "uploads"),
         "tmpdir": os.path.join(tmp, "tmpdir")}
    for k in ("www", "uploads", "tmpdir"):
        os.makedirs(d[k], exist_ok=True)
    files = static_files(d["www"])
    try:
        proc, port, mport, err_log = serve(a.bin, config(a, d), tmp, env=dict(os.environ, TMPDIR=d["tmpdir"]))
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    cfg = os.path.join(tmp, "ferry.yaml")
    try:
        return run(a, d, files, proc, port, mport, err_log, cfg, warmup)
    finally:
        if proc.poll() is None:
            stop_server(proc)
        if own_tmp:
            subprocess.run(["rm", "-rf", tmp], check=False)


def run(a, d, files, proc, port, mport, err_log, cfg, warmup):
    print(f"soak: ferry pid {proc.pid} on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    rate = a.rate
    saturated = None
    if rate <= 0:
        saturated = tr.saturate(port, a.saturate_seconds, a.saturate_threads)
        rate = saturated / 2
        print(f"soak: GET / saturates at {saturated:.0f} requests/s ({a.saturate_threads} keep-alive clients); "
              f"pacing {rate:.0f}/s", file=sys.stderr, flush=True)
    leak_kb = a.leak_kb
    if leak_kb <= 0:
        base = max([rss(p) for p in children(proc.pid)] or [0]) / MIB
        headroom_kb = max(8.0, a.limit_mb - base) * 1024
        leak_kb = max(1, int(headroom_kb * a.workers / (a.recycle_every * rate * tr.LEAK_SHARE)))
        print(f"soak: workers at {base:.0f} MiB: /leak keeps {leak_kb} KB", file=sys.stderr, flush=True)
    a.leak_kb = leak_kb
    stats = tr.Stats()
    stop = threading.Event()
    routes = tr.http_routes(files, leak_kb)
    n_http = a.keepalive + a.fresh
    period = n_http / rate
    threads = [threading.Thread(target=tr.http_client, args=(port, stats, stop, period, i < a.keepalive, routes, i))
               for i in range(n_http)]
    threads.append(threading.Thread(target=tr.crash_client, args=(port, stats, stop, a.crash_every)))
    threads += [threading.Thread(target=tr.chat_client, args=(port, stats, stop, c, 1.0, 30)) for c in range(a.chat)]
    threads.append(threading.Thread(target=tr.stalled_receiver, args=(port, stats, stop, 5.0)))
    if a.bulk_kbps > 0:
        bulk = (port, stats, stop, "bulk", BULK_SIZE / (a.bulk_kbps * 1024), 30, "bulk", BULK_SIZE)
        threads.append(threading.Thread(target=tr.chat_client, args=bulk))
    threads += [threading.Thread(target=tr.sse_reader, args=(port, stats, stop, 40)) for _ in range(a.sse)]
    reset_log = []
    threads.append(threading.Thread(target=resetter, args=(a.bin, cfg, stop, a.reset_every, reset_log)))
    probe = Probe(proc.pid, d)
    rows = []
    start = time.monotonic()
    for t in threads:
        t.daemon = True  # a client stuck past the join below does not keep the driver alive
        t.start()
    last_restarts, resets_seen, minute_samples = restarts(mport), 0, []
    try:
        end = start + a.minutes * 60
        next_sample = start + SAMPLE_EVERY
        next_row = start + 60
        while time.monotonic() < end - 0.5 and proc.poll() is None:
            time.sleep(max(0.0, min(next_sample, next_row) - time.monotonic()))
            now = time.monotonic()
            if now >= next_sample:
                s = probe.take(now - start)
                if s:
                    minute_samples.append(s)
                next_sample += SAMPLE_EVERY
            if now >= next_row:
                rst = restarts(mport)
                delta = {k: v - last_restarts.get(k, 0) for k, v in rst.items() if v - last_restarts.get(k, 0) > 0}
                last_restarts = rst
                row = minute_row(len(rows) + 1, stats.rotate(), minute_samples, delta, reset_log[resets_seen:], rate)
                resets_seen = len(reset_log)
                rows.append(row)
                minute_samples = []
                print(progress(row), file=sys.stderr, flush=True)
                next_row += 60
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    alive = proc.poll() is None
    tail = stats.rotate()
    time.sleep(2)
    after = probe.take(time.monotonic() - start) if alive else None
    if alive:
        stop_server(proc)
    left_after_exit = probe.temp_named()
    return report(a, rows, tail, after, left_after_exit, alive, saturated, rate, warmup, err_log, proc.returncode)


def progress(r):
    return (f"soak: minute {r['minute']}: RSS {r['rss'] / MIB:.1f} MiB, fds {r['fds_min']}-{r['fds_max']}, "
            f"threads {r['threads']}, temp {r['temp']}, {r['rate']:.0f} req/s, non-2xx {r['non2xx']}, "
            f"errors {r['errors']}, 502 crash {r['crash502']}, p99 {r['p99']:.1f} ms")


def change(first, last):
    return (last - first) / first * 100 if first else float("inf")


def report(a, rows, tail, after, left_after_exit, alive, saturated, rate, warmup, err_log, rc):
    steady = [r for r in rows if r["minute"] > warmup]
    non2xx, errors, wrong, crash, by = 0, 0, 0, 0, {}
    for r in rows + [minute_row(0, tail, [], {}, [], rate)]:
        non2xx += r["non2xx"]
        errors += r["errors"]
        wrong += r["wrong"]
        crash += r["crash502"]
        for k, v in list(r["non2xx_by"].items()) + list(r["errors_by"].items()):
            by[k] = by.get(k, 0) + v
    resets = [x for r in rows for x in r["resets"]]
    failed_resets = [x for x in resets if x[2] != 0]
    with open(err_log, errors="replace") as f:
        log = f.read().splitlines()
    warn_lines = [l for l in log if re.search(r"\b(WARN|ERROR)\b", l)]
    kinds = {}
    for l in warn_lines:
        k = re.sub(r"\d+", "N", l.split(" ", 1)[-1])[:140]
        kinds[k] = kinds.get(k, 0) + 1

    lines = [f"# Soak: mixed traffic for {a.minutes:g} minutes", "",
             f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {os.cpu_count()} CPUs, "
             f"load average {os.getloadavg()[0]:.1f} at the end (the clients and the server share the cores)",
             f"- command: `{a.command}`",
             f"- rate: {rate:.0f} HTTP requests/s paced" + (f" (half of {saturated:.0f}/s, GET / from "
                                                            f"{a.saturate_threads} keep-alive clients for "
                                                            f"{a.saturate_seconds:g} s)" if saturated else ""),
             f"- {a.keepalive} keep-alive and {a.fresh} new-connection HTTP clients (GET /, static files, forms, "
             f"64 KiB uploads, 200 KiB raw bodies, /leak keeping {a.leak_kb} KB); GET /crash every "
             f"{a.crash_every:g} s; {a.chat} WebSocket chat clients (1 KB messages, 1/s, leave and rejoin), "
             f"1 stalled receiver of chat and of {a.bulk_kbps:g} KiB/s of 16 KB messages, {a.sse} SSE readers; "
             f"`ferry reset` of both pools every {a.reset_every:g} s",
             f"- {a.workers} HTTP workers with max_worker_memory {a.limit_mb} MB, 2 WebSocket workers", "",
             "| min | ferry RSS | fds min–max | threads | temp files | req/s | non-2xx | errors | crash 502 | "
             "p50 | p99 | WS sent/recv, p99, stalled conns | SSE events | largest worker | recycled | resets |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        rec = ", ".join(f"{p} {c} {v:.0f}" for (p, c), v in sorted(r["recycled"].items())) or "-"
        rs = ", ".join(f"{x[1]} {'ok' if x[2] == 0 else 'rc ' + str(x[2])} {x[3]:.1f} s" for x in r["resets"]) or "-"
        ws = r["ws"]
        lines.append(f"| {r['minute']} | {r['rss'] / MIB:.1f} MiB | {r['fds_min']}–{r['fds_max']} | "
                     f"{r['threads']} | {r['temp']} | {r['rate']:.0f} | {r['non2xx']} | {r['errors']} | "
                     f"{r['crash502']} | {r['p50']:.1f} ms | {r['p99']:.1f} ms | "
                     f"{ws[0]}/{ws[1]}, {ws[2]:.1f} ms, {r['stalled']} | {r['sse'][0]} | "
                     f"{r['worker_rss'] / MIB:.0f} MiB | {rec} | {rs} |")
    verdict = []
    ok = alive
    if len(steady) >= 2:
        f0, f1 = steady[0], steady[-1]
        rss_c, fd_c = change(f0["rss"], f1["rss"]), change(f0["fds_min"], f1["fds_min"])
        ok &= abs(rss_c) <= 5 and abs(fd_c) <= 5
        verdict += [f"- RSS after warm-up ({warmup:g} min): {f0['rss'] / MIB:.1f} MiB in minute {f0['minute']}, "
                    f"{f1['rss'] / MIB:.1f} MiB in minute {f1['minute']} ({rss_c:+.1f} %): "
                    f"{'within' if abs(rss_c) <= 5 else 'NOT within'} 5 % (highest minute after warm-up: "
                    f"{max(r['rss'] for r in steady) / MIB:.1f} MiB)",
                    f"- descriptors (the minute's floor): {f0['fds_min']} in minute {f0['minute']}, {f1['fds_min']} "
                    f"in minute {f1['minute']} ({fd_c:+.1f} %): {'within' if abs(fd_c) <= 5 else 'NOT within'} 5 %; "
                    f"threads {f0['threads']} then {f1['threads']}"]
    else:
        verdict.append(f"- too short for the flatness verdict: {len(steady)} minute(s) after a warm-up of {warmup:g}")
    ok &= non2xx == 0 and errors == 0 and wrong == 0
    verdict.append(f"- non-2xx other than the crashes' 502s: {non2xx}; connection errors: {errors}; wrong answers: "
                   f"{wrong}" + (" (" + "; ".join(f"{k}: {v}" for k, v in sorted(by.items())) + ")" if by else ""))
    verdict.append(f"- crash route: {crash} answered 502 (expected)")
    left = after["temp"] if after else None
    ok &= left == 0 and left_after_exit == 0
    verdict.append(f"- temp files 2 s after the traffic stopped: {left if left is not None else 'n/a'} "
                   f"(named and held open); left after the server exited: {left_after_exit}")
    if after:
        verdict.append(f"- quiet server 2 s after the traffic stopped: RSS {after['rss'] / MIB:.1f} MiB, "
                       f"{after['fds']} descriptors, {after['threads']} threads")
    ok &= not failed_resets
    verdict.append(f"- resets: {len(resets)}, failed {len(failed_resets)}"
                   + ("".join(f"; {x[1]} rc {x[2]}: {x[4]}" for x in failed_resets[:3])))
    verdict.append(f"- server log: {len(warn_lines)} WARN/ERROR lines"
                   + "".join(f"\n  - {v}× `{k}`" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:8]))
    verdict.append(f"- the server ran to the end; exit status {rc} after SIGTERM" if alive
                   else f"- the server EXITED EARLY (status {rc})")
    verdict.append(f"- goal met: {'yes' if ok else 'NO'}")
    text = "\n".join(lines + [""] + [v for v in verdict if v]) + "\n"
    os.makedirs(a.results, exist_ok=True)
    path = os.path.join(a.results, f"soak-{time.strftime('%Y-%m-%d', time.gmtime())}.md")
    with open(path, "w") as f:
        f.write(text)
    print(text)
    print(f"soak: written to {os.path.relpath(path, ROOT)}", file=sys.stderr)
    return 1 if not alive else (0 if ok else 2)


if __name__ == "__main__":
    sys.exit(main())
