#!/usr/bin/env python3
"""What a max_jobs swap costs the machine, from the scheduler's own record (issue 9).

bench/recycle.sh says how much throughput recycling costs; this script says what happens on the CPUs around
each swap. It runs one ferry (2 workers by default, tests/php/hello.php, opcache on), drives it with
`wrk -t2 -c64`, and after a warm-up records every context switch, fork and exit on the machine for a few
seconds (`perf record -a -e sched:sched_switch,sched:sched_process_fork,sched:sched_process_exit`; root,
and Debian's linux-perf). From that record it prints:

- per swap, the CPU time of each process a swap makes or ends: the fork template and its middle process
  (fork mode), the retiring worker's last slice (its exit), the new worker's first 10 ms;
- the machine around the retiring workers' exits (or, `--around birth`, the new workers' births), in 10 ms
  bins from -80 ms to +80 ms and "far" (every other moment): PHP wake-ups per millisecond (each request
  wakes a worker about once: a throughput proxy), ferry's and PHP's CPU per wake-up (PHP's includes the
  template and middle processes), and the idle share of the CPUs;
- the serving lost around each exit and each birth: what the bins lack against the far rate, summed, in
  milliseconds of serving at the far rate, and that as a share of the run at the recorded swap rate.

    python3 bench/swap_trace.py --fork                 # max_jobs 10000, forked workers
    python3 bench/swap_trace.py                        # exec'd workers
    python3 bench/swap_trace.py --fork --around birth  # the bins around the births
    python3 bench/swap_trace.py --fork --max-jobs 0    # no swaps: the "far" row alone, for comparison

Recording costs some CPU itself (perf's buffers are written while it runs): compare runs of this script
with each other, not with bench/run.sh or recycle.sh figures. One 4-second record has 15-20 swaps, and its
serving-lost figure moves by +-5 ms from run to run on the 2-vCPU benchmark VM: take several runs.
"""
import argparse
import bisect
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from ferry_bench import add_hello_args, hello_config, require, serve, stop

EVENT = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s+(.*)$")
SWITCH = re.compile(r"prev_comm=(.*?) prev_pid=(\d+) .*==> next_comm=(.*?) next_pid=(\d+)")
FORK = re.compile(r"comm=.*? pid=(\d+) child_comm=(.*?) child_pid=(\d+)")
BIN_MS, SPAN_MS = 10, 80


def parse(text):
    """[(time, cpu, event, fields, comm, pid)] of `perf script` lines."""
    out = []
    for line in text.splitlines():
        m = EVENT.match(line)
        if m:
            comm, pid, _tid, cpu, t, event, rest = m.groups()
            out.append((float(t), int(cpu), event.split(":", 1)[1], rest, comm, int(pid)))
    return out


def analyse(events, ferry_pid, around="exit"):
    """The report's lines, from the parsed record of a run whose server is ferry_pid; the bins are taken
    around the retiring workers' exits, or (around="birth") the new workers' births."""
    if not events:
        return ["no events recorded"]
    t0, t_end = events[0][0], events[-1][0]
    runs, current = [], {}  # (cpu, comm, tid, start, end): who ran where, and for how long
    forks, exits = [], {}
    for t, cpu, event, rest, comm, pid in events:
        if event == "sched_switch":
            m = SWITCH.search(rest)
            if not m:
                continue
            if cpu in current:
                c, tid, since = current[cpu]
                runs.append((cpu, c, tid, since, t))
            current[cpu] = (m.group(3), int(m.group(4)), t)
        elif event == "sched_process_fork":
            m = FORK.search(rest)
            if m:
                forks.append((t, int(m.group(1)), int(m.group(3)), m.group(2)))
        elif event == "sched_process_exit" and comm == "php":
            exits[pid] = t
    # Fork mode: the template forks a middle process, which forks the worker (or, a template that forks once,
    # the worker itself). Exec mode: ferry (any of its threads: their pid in the record is the thread's)
    # clones the worker. A new worker is a child that forks nothing, made by one of those.
    ferry_tids = {int(x) for x in os.listdir(f"/proc/{ferry_pid}/task")} if os.path.isdir(
        f"/proc/{ferry_pid}/task") else {ferry_pid}
    forkers = {p for _, p, _, _ in forks}
    middles = {child for _, p, child, _ in forks if child in forkers and p not in ferry_tids}
    new_workers = [(t, child) for t, p, child, comm in forks
                   if child not in forkers and (p in ferry_tids or comm == "php")]
    templates = {p for _, p, child, _ in forks if child in middles} | {
        p for t, p, child, _ in forks if (t, child) in set(new_workers) and p not in middles and p not in ferry_tids}
    swaps = sorted(t for t, _ in new_workers)
    retired = sorted((t, pid) for pid, t in exits.items() if pid not in middles and pid not in templates)

    def cpu_of(tids, start=None, end=None):
        return sum(e - s for _, _, tid, s, e in runs if tid in tids and (start is None or start <= s < end))

    lines = [f"recorded {t_end - t0:.2f} s: {len(swaps)} new worker(s), {len(retired)} worker exit(s)"
             f" ({len(swaps) / (t_end - t0):.2f} swaps/s)", ""]
    if swaps:
        lines += ["| per swap (medians) | CPU ms |", "|---|---:|"]
        med = lambda xs: sorted(xs)[len(xs) // 2] * 1000 if xs else float("nan")  # noqa: E731
        if templates:
            lines.append(f"| fork template (its CPU over the record ÷ swaps) | "
                         f"{cpu_of(templates) / len(swaps) * 1000:.2f} |")
            if middles:
                lines.append(f"| middle process | {med([cpu_of({m}) for m in middles]):.2f} |")
        last = []
        for t, pid in retired:
            mine = [e - s for _, _, tid, s, e in runs if tid == pid and e <= t + 0.001]
            if mine:
                last.append(mine[-1])
        lines.append(f"| retiring worker's last slice (its exit) | {med(last):.2f} |")
        lines.append(f"| new worker's first 10 ms | "
                     f"{med([cpu_of({w}, t, t + 0.01) for t, w in new_workers]):.2f} |")
        # The overlap: from a new worker's birth to the exit of the worker it replaces (the next exit).
        gaps = [t - swaps[i - 1] for t, _ in retired if (i := bisect.bisect_left(swaps, t)) > 0]
        lines.append(f"| from a new worker's birth to the next worker exit (ms, not CPU) | {med(gaps):.1f} |")
        lines.append("")

    marks = [t for t, _ in retired] if around == "exit" else swaps
    what = "a worker's exit" if around == "exit" else "a new worker's birth"
    acc = collections.defaultdict(lambda: collections.defaultdict(float))
    wakes = collections.Counter()
    for cpu, comm, tid, s, e in runs:
        i = bisect.bisect_left(marks, s)
        near = [marks[j] for j in (i - 1, i) if 0 <= j < len(marks)]
        off = (s - min(near, key=lambda x: abs(s - x))) * 1000 if near else None
        b = "far" if off is None or abs(off) >= SPAN_MS else int((off + SPAN_MS) // BIN_MS) * BIN_MS - SPAN_MS
        kind = ("idle" if tid == 0 else "ferry" if tid in ferry_tids or comm.startswith("ferry")
                else "php" if comm == "php" else "other")
        acc[b][kind] += e - s
        if kind == "php":
            wakes[b] += 1
    lines += [f"| from {what} (ms) | PHP wake-ups per ms | ferry µs per wake-up | PHP µs per wake-up "
              "| CPUs idle |", "|---|---:|---:|---:|---:|"]
    n_cpus = len({cpu for cpu, *_ in runs}) or 1
    rate = {}
    for b in [x for x in range(-SPAN_MS, SPAN_MS, BIN_MS) if x in acc] + (["far"] if "far" in acc else []):
        total = sum(acc[b].values())
        n = wakes[b]
        if not n or not total:
            continue
        rate[b] = n / (total / n_cpus * 1000)
        label = b if b == "far" else f"{b:+d} … {b + BIN_MS:+d}"
        lines.append(f"| {label} | {rate[b]:.1f} | {acc[b]['ferry'] / n * 1e6:.1f} | "
                     f"{acc[b]['php'] / n * 1e6:.1f} | {100 * acc[b]['idle'] / total:.0f} % |")
    if "far" in rate and len(rate) > 1:
        # Each bin holds one 10 ms slice per exit: what it lacks against the far rate, summed, is the serving
        # lost per exit (in ms of the far rate), and that times the exits per second is the share lost.
        lost = sum(rate["far"] - r for b, r in rate.items() if b != "far") / rate["far"] * BIN_MS
        lines += ["", f"serving lost around each {around}: {lost:.1f} ms at the far rate "
                      f"({lost * len(marks) / (t_end - t0) / 10:.1f} % of the run at this swap rate)"]
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_hello_args(ap)
    ap.add_argument("--seconds", type=float, default=4.0, help="seconds recorded")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of load before the record")
    ap.add_argument("--around", choices=("exit", "birth"), default="exit",
                    help="bin the time around the retiring workers' exits (default) or the new workers' births")
    a = ap.parse_args()
    if a.max_jobs < 0 or a.workers < 1 or not 0.5 <= a.seconds <= 10 or a.warmup < 0:
        ap.error("need --max-jobs >= 0, --workers >= 1, 0.5 <= --seconds <= 10, --warmup >= 0")
    require("swap_trace", [a.ferry], ["wrk", "perf"])

    tmp = tempfile.mkdtemp(prefix="ferry-swap-trace-")
    try:
        ferry, port, _, _ = serve(a.ferry, hello_config(a.workers, a.max_jobs, a.fork), tmp)
    except RuntimeError as e:
        sys.exit(f"swap_trace: {e}")
    data = os.path.join(tmp, "sched.data")
    try:
        wrk = subprocess.Popen(["wrk", "-t2", "-c64", f"-d{a.warmup + a.seconds + 1:g}s", f"http://127.0.0.1:{port}/"],
                               stdout=subprocess.PIPE, text=True)
        time.sleep(a.warmup)
        rec = subprocess.run(["perf", "record", "-q", "-a", "-o", data, "-e", "sched:sched_switch",
                              "-e", "sched:sched_process_fork", "-e", "sched:sched_process_exit",
                              "--", "sleep", f"{a.seconds:g}"], capture_output=True, text=True)
        out, _ = wrk.communicate(timeout=a.seconds + 30)
        if rec.returncode != 0:
            sys.exit(f"swap_trace: perf record failed (root is needed): {rec.stderr.strip()}")
        text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,cpu,time,event,trace"],
                              capture_output=True, text=True, check=True).stdout
        events = parse(text)
        lines = analyse(events, ferry.pid, a.around)
        other = "birth" if a.around == "exit" else "exit"
        lines += [x for x in analyse(events, ferry.pid, other) if x.startswith("serving lost")]
    finally:
        stop(ferry)
        shutil.rmtree(tmp, ignore_errors=True)
    rps = re.search(r"Requests/sec:\s+(\S+)", out)
    print(f"ferry, {a.workers} workers, max_jobs {a.max_jobs}, fork: {str(a.fork).lower()}; "
          f"wrk -t2 -c64: {rps.group(1) if rps else '?'} req/s over the whole run (the record included)")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
