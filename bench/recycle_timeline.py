#!/usr/bin/env python3
"""Where max_jobs recycling loses throughput: at the swaps, or all the time (issue 9).

bench/recycle.sh says how much a recycling server serves against a max_jobs: 0 one. This script says when
the difference happens. It runs one ferry (2 workers by default, tests/php/hello.php, opcache on, /metrics
on, debug logs in JSON), drives it with `wrk -t2 -c64` and reads `ferry_http_requests_total` from /metrics
every --interval seconds (a fresh connection per sample: the metrics listener closes after each
answer). The log's "reached max_jobs" and "its replacement starts now" lines mark the swaps. Every sample interval that overlaps [swap - 50 ms, swap + --window] is "near" a swap, the rest "far"; the report
gives both rates and the requests lost per swap ((far rate x near time - near requests) / swaps).

    python3 bench/recycle_timeline.py                     # max_jobs 10000, exec'd workers, 20 s
    python3 bench/recycle_timeline.py --fork --seconds 30
    python3 bench/recycle_timeline.py --max-jobs 0        # the same server without recycling

Far rate below a max_jobs: 0 run's rate (same method, run it too) means a cost that is not at the swaps.
The sampler itself takes some CPU (a Python client and a /metrics render 50 times a second): compare runs
of this script with each other, not with bench/run.sh or recycle.sh figures.
"""
import argparse
import bisect
import datetime
import http.client
import json
import re
import subprocess
import sys
import tempfile
import threading
import time

from ferry_bench import add_hello_args, hello_config, metrics_text, require, serve, stop



def scrape(port):
    """Total answered requests, from one GET /metrics."""
    return sum(float(m.group(1)) for m in
               re.finditer(r"^ferry_http_requests_total\{[^}]*\} (\S+)$", metrics_text(port, timeout=5), re.M))


def log_time(ts):
    return (datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
            .replace(tzinfo=datetime.timezone.utc).timestamp())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_hello_args(ap)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.02, help="seconds between samples")
    ap.add_argument("--window", type=float, default=0.3, help="seconds after a swap counted as near it")
    a = ap.parse_args()
    if a.max_jobs < 0 or a.workers < 1 or a.seconds < 1 or not 0.005 <= a.interval <= 1 or a.window <= 0:
        ap.error("need --max-jobs >= 0, --workers >= 1, --seconds >= 1, 0.005 <= --interval <= 1, --window > 0")
    require("recycle_timeline", [a.ferry], ["wrk"])

    tmp = tempfile.mkdtemp(prefix="ferry-timeline-")
    try:
        ferry, port, mport, log_path = serve(a.ferry, hello_config(a.workers, a.max_jobs, a.fork, """metrics:
  address: 127.0.0.1:0
logs:
  mode: production
  level: debug
"""), tmp)
    except RuntimeError as e:
        sys.exit(f"recycle_timeline: {e}")
    try:
        url = f"http://127.0.0.1:{port}/"
        subprocess.run(["wrk", "-t2", "-c64", "-d2s", url], check=True, stdout=subprocess.DEVNULL)  # warm-up
        samples, failure = [], []
        done = threading.Event()

        def sampler():
            while not done.is_set():
                t = time.time()
                try:
                    samples.append((t, scrape(mport)))
                except (OSError, http.client.HTTPException) as e:  # ferry gone or stalled: say so, stop
                    failure.append(f"GET /metrics failed after {len(samples)} samples: {e}")
                    return
                time.sleep(max(0.0, a.interval - (time.time() - t)))

        th = threading.Thread(target=sampler)
        th.start()
        wrk = subprocess.run(["wrk", "-t2", "-c64", f"-d{a.seconds:g}s", url], check=True,
                             capture_output=True, text=True).stdout
        done.set()
        th.join()
    finally:
        stop(ferry)

    if failure:
        sys.exit(f"recycle_timeline: {failure[0]} (ferry log: {log_path})")
    if len(samples) < 2:
        sys.exit("recycle_timeline: fewer than two /metrics samples: is the host overloaded?")
    t0, t1 = samples[0][0], samples[-1][0]
    swaps = []
    for line in open(log_path):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        msg = j.get("msg", "")
        # A replacement starts at the limit, or before it when a boot outlasts the jobs left (pool: "its
        # replacement starts now"): either line marks a swap.
        if "reached max_jobs" in msg or "its replacement starts now" in msg:
            t = log_time(j["ts"])
            if t0 <= t <= t1:
                swaps.append(t)
    near_n = far_n = near_t = far_t = 0.0
    for (ta, ca), (tb, cb) in zip(samples, samples[1:]):
        k = bisect.bisect_left(swaps, ta - a.window)
        if k < len(swaps) and swaps[k] < tb + 0.05:
            near_n += cb - ca
            near_t += tb - ta
        else:
            far_n += cb - ca
            far_t += tb - ta
    far_rate = far_n / far_t if far_t else 0.0
    wrk_rps = re.search(r"Requests/sec:\s*([0-9.]+)", wrk)
    mode = "fork: true" if a.fork else "exec'd workers"
    print(f"| max_jobs {a.max_jobs}, {mode} | value |\n|---|---:|")
    print(f"| wrk req/s | {float(wrk_rps.group(1)) if wrk_rps else 0:.0f} |")
    print(f"| sampled req/s, whole run ({t1 - t0:.1f} s, {len(samples)} samples) | "
          f"{(samples[-1][1] - samples[0][1]) / (t1 - t0):.0f} |")
    print(f"| swaps (replacements started) | {len(swaps)} ({len(swaps) / (t1 - t0):.2f}/s) |")
    print(f"| req/s far from swaps ({far_t:.1f} s) | {far_rate:.0f} |")
    if near_t:
        print(f"| req/s near swaps, -50 ms to +{a.window * 1000:.0f} ms ({near_t:.1f} s) | {near_n / near_t:.0f} |")
        lost = (far_rate * near_t - near_n) / len(swaps)
        what = f"{lost / far_rate * 1000 if far_rate else 0:.1f} ms of serving" if lost > 0 else "none"
        print(f"| requests lost per swap (against the far rate) | {lost:.0f} ({what}) |")
    print(f"\nferry log: {log_path}")


if __name__ == "__main__":
    main()
