#!/usr/bin/env python3
"""What one PHP worker boot costs in CPU, and which part of PHP's configuration the cost comes from.

In exec mode (`fork: false`) every max_jobs / ttl / memory recycle boots a new PHP process, and its CPU is
taken from the workers that serve (issue 9: on 2 cores, boots are what keeps exec-mode recycling above 3 %).
Ferry cannot make PHP's own start-up cheaper; this shows a team what theirs costs and what trimming it
saves. Each variant runs `--runs` times with stdin closed (a worker then finds no request and ends, as a
recycled worker does), the variants taking turns round by round, and each run is measured by its own
rusage (user + system CPU, from wait4), so the machine's load changes the figures less than wall time;
run it on an idle machine all the same.

  python3 bench/boot_cost.py                              # tests/php/hello.php, 20 runs per variant
  python3 bench/boot_cost.py --worker app/worker.php --runs 10

Variants: PHP with no php.ini (-n), PHP with this machine's php.ini and conf.d (the extensions it loads),
plus opcache in the CLI (its shared memory at the configured and at a 16 MB size), then the worker
itself with the benchmarks' opcache flags, and the worker with -n and only ext-msgpack (and opcache).
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPCACHE = ["-d", "opcache.enable=1", "-d", "opcache.enable_cli=1"]  # bench/lib.sh's PHP_OPCACHE


def boot_cpu(cmd):
    """CPU seconds (user + system) of one run of cmd, from its own rusage; None and the cause when it does
    not end with status 0."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    proc.stderr.close()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    if proc.returncode != 0:
        return None, "exit status %d: %s" % (proc.returncode, err.decode(errors="replace").strip()[:200])
    return ru.ru_utime + ru.ru_stime, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", default=os.path.join(ROOT, "tests", "php", "hello.php"),
                    help="the worker script (default tests/php/hello.php)")
    ap.add_argument("--php", default="php", help="the PHP binary (default php)")
    ap.add_argument("--runs", type=int, default=20, help="boots per variant (default 20)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if not os.path.isfile(args.worker):
        ap.error("--worker %s: no such file" % args.worker)
    php, w = args.php, args.worker
    variants = [
        ("PHP alone, no php.ini (-n)", [php, "-n", "-r", ""]),
        ("PHP with this machine's php.ini and conf.d", [php, "-r", ""]),
        ("  + opcache in the CLI", [php, *OPCACHE, "-r", ""]),
        ("  + opcache in the CLI, opcache.memory_consumption=16",
         [php, *OPCACHE, "-d", "opcache.memory_consumption=16", "-r", ""]),
        ("the worker, opcache on (as in bench/)", [php, *OPCACHE, w]),
        ("the worker, opcache on, memory_consumption=16",
         [php, *OPCACHE, "-d", "opcache.memory_consumption=16", w]),
        ("the worker, -n and only ext-msgpack", [php, "-n", "-d", "extension=msgpack", w]),
        ("the worker, -n, ext-msgpack and opcache on",
         [php, "-n", "-d", "extension=msgpack", "-d", "zend_extension=opcache", *OPCACHE, w]),
    ]
    samples = {label: [] for label, _ in variants}
    failed = {}
    try:
        for label, cmd in variants:  # one run each first: warms the page cache, finds what fails
            cpu, err = boot_cpu(cmd)
            if cpu is None:
                failed[label] = err
        for _ in range(args.runs):  # round by round, so a drift of the machine touches every variant alike
            for label, cmd in variants:
                if label not in failed:
                    samples[label].append(boot_cpu(cmd)[0])
    except FileNotFoundError:
        sys.exit("boot_cost: %s not found (run scripts/setup.sh)" % php)
    print("| variant | CPU per boot, median (ms) | min … max | command |")
    print("|---|---:|---:|---|")
    for label, cmd in variants:
        shown = " ".join(c if c else "''" for c in cmd).replace(ROOT + "/", "")
        if label in failed:
            print("| %s | fails: %s | | `%s` |" % (label, failed[label], shown))
            continue
        v = [x * 1000 for x in samples[label]]
        print("| %s | %.1f | %.1f … %.1f | `%s` |" % (label, statistics.median(v), min(v), max(v), shown))
    print("\n%d boots per variant, interleaved, each one's own rusage (user + system); %s" % (args.runs, subprocess.run(
        [php, "-r", "echo 'PHP ', PHP_VERSION, ', ', count(get_loaded_extensions()), ' extensions loaded';"],
        capture_output=True, text=True).stdout))


if __name__ == "__main__":
    main()
