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
  python3 bench/boot_cost.py --app 400 --runs 10          # a framework-like boot: 400 classes loaded

Variants: PHP with no php.ini (-n), PHP with this machine's php.ini and conf.d (the extensions it loads),
plus opcache in the CLI (its shared memory at the configured and at a 16 MB size), then the worker
itself with the benchmarks' opcache flags, and the worker with -n and only ext-msgpack (and opcache).
The last two rows are what `fork: true` costs a worker that is not Ferry's library (a PHP-level template,
docs/protocol.md §8.1): a PHP started once with a prepended file that forks FORKS children one after the
other, each running the worker script from its first line; a row is (the CPU of a run with FORKS + 1 forks −
a run with one) ÷ FORKS, with and without opcache (with it, a fork finds what the first one compiled in the
template's shared memory, so the row leaves that first compile out: a template serves many forks). The
prepended file is a plain fork loop, not ferry's prefork.php (which also answers the server's handshake
and moves the fork onto its own pipes: a few system calls more).

--app N --write-app DIR writes that app and ends (bench/recycle.sh APP_CLASSES uses it).
--app N replaces the worker with a generated one that loads N classes of 40 methods each at boot (what a
framework's boot compiles), to see how the cost grows with the code a boot loads.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPCACHE = ["-d", "opcache.enable=1", "-d", "opcache.enable_cli=1"]  # bench/lib.sh's PHP_OPCACHE


TIMEOUT = 20  # seconds one boot may take before it counts as hanging
FORKS = 10  # forks per run of a fork variant

# The fork variants' prepended file: FERRY_BENCH_FORKS children, one after the other, each running the worker.
FORK_LOOP = """<?php
for ($i = (int) getenv('FERRY_BENCH_FORKS'); $i > 0; --$i) {
    $pid = pcntl_fork();
    if ($pid === 0) {
        require get_included_files()[0];
        exit(0);
    }
    pcntl_waitpid($pid, $status);
}
exit(0);
"""


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def boot_cpu(cmd, forks=None):
    """CPU seconds (user + system) of one run of cmd, and "" ; None and the cause when it does not end with
    status 0 within TIMEOUT (a worker that waits for something other than its stdin hangs here). One child
    runs at a time, so the children's rusage grows by exactly this one's (with its own waited-for children).
    `forks`: a fork variant's command, run with forks + 1 forks and with 1: the CPU of one fork once a first
    one has compiled what opcache did not hold yet (a template serves many forks)."""
    if forks is not None:
        many, err = boot_cpu(cmd + [("FERRY_BENCH_FORKS", str(forks + 1))])
        if many is None:
            return None, err
        one, err = boot_cpu(cmd + [("FERRY_BENCH_FORKS", "1")])
        return (None, err) if one is None else ((many - one) / forks, "")
    env = dict(os.environ, **dict(c for c in cmd if isinstance(c, tuple)))
    cmd = [c for c in cmd if not isinstance(c, tuple)]
    before = children_cpu()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, "did not end within %d s with stdin closed" % TIMEOUT
    if proc.returncode != 0:
        return None, "exit status %d: %s" % (proc.returncode, err.decode(errors="replace").strip()[:200])
    return children_cpu() - before, ""


def generate_app(root, classes):
    """A framework-like boot under root: boot.php loads `classes` classes of 40 methods each, then ends."""
    for i in range(classes):
        with open(os.path.join(root, "C%d.php" % i), "w") as f:
            f.write("<?php\nnamespace App;\nfinal class C%d\n{\n" % i)
            for m in range(40):
                f.write("    public function m%d(array $a, int $n = %d): array\n    {\n        $o = [];\n"
                        "        foreach ($a as $k => $v) {\n            if ($k %% 3 === %d) {\n"
                        "                $o[$k] = $v * $n + strlen((string) $k);\n            }\n        }\n"
                        "        return $o;\n    }\n" % (m, m, m % 3))
            f.write("}\n")
    boot = os.path.join(root, "boot.php")
    with open(boot, "w") as f:
        f.write("<?php\nfor ($i = 0; $i < %d; $i++) {\n    require __DIR__ . \"/C$i.php\";\n}\n" % classes)
    old = os.stat(boot).st_mtime - 60  # opcache does not cache a file changed in the last 2 s (file_update_protection)
    for name in os.listdir(root):
        os.utime(os.path.join(root, name), (old, old))
    return boot


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
    ap.add_argument("--app", type=int, metavar="N",
                    help="instead of --worker, a generated worker that loads N classes of 40 methods at boot")
    ap.add_argument("--write-app", metavar="DIR",
                    help="with --app N: only write the generated app into DIR (its DIR/boot.php) and end")
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
    if args.app is not None and args.app < 1:
        ap.error("--app must be at least 1")
    if args.write_app is not None:
        if args.app is None or not os.path.isdir(args.write_app):
            ap.error("--write-app needs --app N and an existing directory")
        print(generate_app(args.write_app, args.app))
        return
    tmp = tempfile.TemporaryDirectory(prefix="ferry-boot-cost-")
    if args.app is not None:
        args.worker = generate_app(tmp.name, args.app)
    if not os.path.isfile(args.worker):
        ap.error("--worker %s: no such file" % args.worker)
    php, w = args.php, args.worker
    loop = os.path.join(tmp.name, "fork_loop.php")
    with open(loop, "w") as f:
        f.write(FORK_LOOP)
    prepend = ["-d", "auto_prepend_file=" + loop]
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
        ("the worker forked from a PHP-level template, opcache on", [php, *OPCACHE, *prepend, w]),
        ("the worker forked from a PHP-level template, opcache off", [php, *prepend, w]),
    ]
    forks = {label: FORKS for label, _ in variants if "forked" in label}
    samples = {label: [] for label, _ in variants}
    failed = {}
    try:
        for label, cmd in variants:  # one run each first: warms the page cache, finds what fails
            cpu, err = boot_cpu(cmd, forks.get(label))
            if cpu is None:
                failed[label] = err
        for _ in range(args.runs):  # round by round, so a drift of the machine touches every variant alike
            for label, cmd in variants:
                if label not in failed:
                    cpu, err = boot_cpu(cmd, forks.get(label))
                    if cpu is None:  # it worked once: say so, and keep no figure from a half-working variant
                        failed[label] = "after %d good boots, %s" % (len(samples[label]), err)
                    else:
                        samples[label].append(cpu)
    except FileNotFoundError:
        sys.exit("boot_cost: %s not found (run scripts/setup.sh)" % php)
    print("| variant | CPU per boot, median (ms) | min … max | command |")
    print("|---|---:|---:|---|")
    for label, cmd in variants:
        shown = " ".join(c if c else "''" for c in cmd).replace(ROOT + "/", "").replace(tmp.name + "/", "")
        if label in failed:
            print("| %s | fails: %s | | `%s` |" % (label, failed[label], shown))
            continue
        v = [x * 1000 for x in samples[label]]
        print("| %s | %.1f | %.1f … %.1f | `%s` |" % (label, statistics.median(v), min(v), max(v), shown))
    print("\n%d boots per variant, interleaved, each one's rusage (user + system); a fork row: a run with %d + 1"
          " forks less a run with 1, per fork; %s" % (args.runs, FORKS, subprocess.run(
        [php, "-r", "echo 'PHP ', PHP_VERSION, ', ', count(get_loaded_extensions()), ' extensions loaded';"],
        capture_output=True, text=True).stdout))


if __name__ == "__main__":
    main()
