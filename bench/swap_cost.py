#!/usr/bin/env python3
"""What one max_jobs swap costs the ferry process itself, an earlier binary against this one.

    python3 bench/swap_cost.py --before /tmp/old/ferry              # build/ferry as the other
    python3 bench/swap_cost.py --before OLD --after NEW --max-jobs 1000 --rounds 6

Both run hello world on 2 workers with a low max_jobs (default 1000: ~10 swaps a second at c64, so the
swaps dominate), in alternating rounds (AB, BA, ...). Each round: 2 s of `wrk -t2 -c64` warm-up, then 8 s
measured, during which ferry's own minor page faults and CPU time (/proc/PID/stat: the server only, not its
workers) and the swaps (workers that became ready, from its log) are counted. Prints each run, then per binary
the medians of req/s, swaps per second, ferry's minor faults per swap and ferry's CPU µs per request, and the
median of the per-round req/s ratios (after ÷ before). Written to compare worker launches (bench/README.md,
"Launching workers"): a fork write-protects the server and every page it writes next faults again."""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferry_bench import ROOT, hello_config, require, serve, stop  # noqa: E402


def proc_counters(pid):
    """(minor faults, CPU seconds) of the process itself."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(port, seconds):
    out = subprocess.run(["wrk", "-t2", "-c64", f"-d{seconds}s", f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, check=True).stdout
    return int(re.search(r"(\d+) requests in", out).group(1)), float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def swaps(log_path):
    """Workers that became ready so far: after the first ones, one per swap (a replacement started early,
    before its worker reaches max_jobs, logs no "reached max_jobs")."""
    with open(log_path) as f:
        return f.read().count(" ready (")


def one_run(binary, max_jobs, seconds):
    tmp = tempfile.mkdtemp(prefix="ferry-swap-")
    proc = None
    try:
        config = hello_config(2, max_jobs, False, "logs:\n  level: debug\n", io_threads=1)
        proc, port, _, log = serve(binary, config, tmp)
        wrk(port, 2)
        s0, (f0, c0) = swaps(log), proc_counters(proc.pid)
        reqs, rps = wrk(port, seconds)
        s1, (f1, c1) = swaps(log), proc_counters(proc.pid)
        n = s1 - s0
        return {"rps": rps, "swaps_per_s": n / seconds, "faults_per_swap": (f1 - f0) / n if n else float("nan"),
                "cpu_us_per_req": (c1 - c0) * 1e6 / reqs}
    finally:
        if proc:
            stop(proc, 15)
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the earlier ferry binary")
    ap.add_argument("--after", default=os.path.join(ROOT, "build/ferry"), help="default: build/ferry")
    ap.add_argument("--max-jobs", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=8)
    a = ap.parse_args()
    require("swap_cost", [a.before, a.after], ["wrk"])
    runs = {"before": [], "after": []}
    ratios = []
    for r in range(a.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        got = {}
        for name in order:
            got[name] = one_run(a.before if name == "before" else a.after, a.max_jobs, a.seconds)
            runs[name].append(got[name])
            g = got[name]
            print(f"round {r + 1} {name}: {g['rps']:.0f} req/s, {g['swaps_per_s']:.1f} swaps/s, "
                  f"{g['faults_per_swap']:.0f} minor faults per swap, {g['cpu_us_per_req']:.2f} µs ferry CPU/req",
                  flush=True)
        ratios.append(got["after"]["rps"] / got["before"]["rps"])
    print(f"\nmax_jobs {a.max_jobs}, {a.rounds} rounds of {a.seconds} s, wrk -t2 -c64")
    print("| binary | req/s | swaps/s | ferry minor faults per swap | ferry CPU µs/req |")
    print("|---|---:|---:|---:|---:|")
    for name, path in (("before", a.before), ("after", a.after)):
        med = {k: statistics.median(x[k] for x in runs[name]) for k in runs[name][0]}
        print(f"| {name} ({path}) | {med['rps']:.0f} | {med['swaps_per_s']:.1f} | {med['faults_per_swap']:.0f} "
              f"| {med['cpu_us_per_req']:.2f} |")
    print(f"\nafter ÷ before, req/s per round: {' '.join(f'{x:.3f}' for x in ratios)}; median "
          f"{statistics.median(ratios):.3f}×")


if __name__ == "__main__":
    main()
