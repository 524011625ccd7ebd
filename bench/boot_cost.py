#!/usr/bin/env python3
"""What one PHP worker boot costs in CPU, and which part of PHP's configuration the cost comes from.

In exec mode (`fork: false`) every max_jobs / ttl / memory recycle boots a new PHP process, and its CPU is
taken from the workers that serve (issue 9: on 2 cores, boots are what keeps exec-mode recycling above 3 %).
Ferry cannot make PHP's own start-up cheaper; this shows a team what theirs costs and what trimming it
saves. Each variant runs `--runs` times with stdin closed (a worker then finds no request and ends, as a
recycled worker does), the variants taking turns round by round, and each run is measured by its own
rusage (user + system CPU), so the machine's load changes the figures less than wall time;
run it on an idle machine all the same.

  python3 bench/boot_cost.py                              # tests/php/hello.php, 20 runs per variant
  python3 bench/boot_cost.py --worker app/worker.php --runs 10
  python3 bench/boot_cost.py --runs 20 --one php -d opcache.enable_cli=1 app/worker.php   # one command

Variants: PHP with no php.ini (-n), PHP with this machine's php.ini and conf.d (the extensions it loads),
plus opcache in the CLI (its shared memory at the configured and at a 16 MB size), then the worker
itself with the benchmarks' opcache flags, and the worker with -n and only ext-msgpack (and opcache).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPCACHE = ["-d", "opcache.enable=1", "-d", "opcache.enable_cli=1"]  # bench/lib.sh's PHP_OPCACHE


TIMEOUT = 20  # seconds one boot may take before it counts as hanging


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def boot_cpu(cmd):
    """CPU seconds (user + system) of one run of cmd, and "" ; None and the cause when it does not end with
    status 0 within TIMEOUT (a worker that waits for something other than its stdin hangs here). One child
    runs at a time, so the children's rusage grows by exactly this one's."""
    before = children_cpu()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, "did not end within %d s with stdin closed" % TIMEOUT
    if proc.returncode != 0:
        return None, "exit status %d: %s" % (proc.returncode, err.decode(errors="replace").strip()[:200])
    return children_cpu() - before, ""


def median_ms(cmd, runs):
    """The median CPU milliseconds of runs boots of cmd, one after the other; exits with the cause on a failure."""
    v = []
    for _ in range(runs):
        cpu, err = boot_cpu(cmd)
        if cpu is None:
            sys.exit("boot_cost: %s: %s" % (" ".join(cmd), err))
        v.append(cpu * 1000)
    return statistics.median(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", default=os.path.join(ROOT, "tests", "php", "hello.php"),
                    help="the worker script (default tests/php/hello.php)")
    ap.add_argument("--php", default="php", help="the PHP binary (default php)")
    ap.add_argument("--runs", type=int, default=20, help="boots per variant (default 20)")
    ap.add_argument("--one", nargs=argparse.REMAINDER, metavar="CMD",
                    help="only this command (the rest of the line): print its median CPU ms per boot")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.one is not None:
        if not args.one:
            ap.error("--one needs a command")
        try:
            print("%.1f" % median_ms(args.one, args.runs))
        except FileNotFoundError:
            sys.exit("boot_cost: %s not found" % args.one[0])
        return
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
                    cpu, err = boot_cpu(cmd)
                    if cpu is None:  # it worked once: say so, and keep no figure from a half-working variant
                        failed[label] = "after %d good boots, %s" % (len(samples[label]), err)
                    else:
                        samples[label].append(cpu)
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
    print("\n%d boots per variant, interleaved, each one's rusage (user + system); %s" % (args.runs, subprocess.run(
        [php, "-r", "echo 'PHP ', PHP_VERSION, ', ', count(get_loaded_extensions()), ' extensions loaded';"],
        capture_output=True, text=True).stdout))


if __name__ == "__main__":
    main()
