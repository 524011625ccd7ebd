#!/usr/bin/env python3
"""Hot reload under load (issue 10): how long from saving a PHP file to the first response with the new code,
and whether any request fails meanwhile.

    python3 bench/reload.py [--edits 50] [--connections 32] [--bin build/ferry] [--modes exec,fork]

For each mode (exec: every worker boots PHP; fork: http.pool.fork), starts ferry with 2 workers on
tests/php/versioned.php (its answer is the version its app directory's version.php returned at boot), with
reload: {interval: 100ms} on that directory, and `wrk -t2 -c<connections>` running the whole time. Then
<edits> times: writes version.php with a new version, and a probe client (its own keep-alive connection)
asks as fast as it can until the answer shows the new version: that time is the edit's latency. Reports
p50/p99/max of the latencies, the requests wrk completed, and every failure: wrk's non-2xx responses and
socket errors, and the probe's. Writes bench/results/reload.md.
"""
import argparse
import http.client
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def percentile(values, p):
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def run_mode(binary, mode, edits, connections):
    tmp = tempfile.mkdtemp(prefix=f"ferry-bench-reload-{mode}-")
    app = os.path.join(tmp, "app")
    os.makedirs(app)
    with open(os.path.join(app, "version.php"), "w") as f:
        f.write("<?php return 'v0';\n")
    conf = os.path.join(tmp, "ferry.yaml")
    with open(conf, "w") as f:
        f.write(f'''version: "3"
server:
  command: "php -d opcache.enable_cli=1 {ROOT}/tests/php/versioned.php"
  env:
    FERRY_TEST_APP: "{app}"
http:
  address: 127.0.0.1:0
  pool:
    num_workers: 2
    fork: {"true" if mode == "fork" else "false"}
reload:
  dirs: ["{app}"]
  interval: 100ms
''')
    err = open(os.path.join(tmp, "stderr.log"), "w")
    proc = subprocess.Popen([binary, "serve", "-c", conf], stdout=subprocess.PIPE, stderr=err,
                            stdin=subprocess.DEVNULL)
    line = proc.stdout.readline().decode()
    if not line.startswith("listening on"):
        proc.kill()
        sys.exit(f"{binary} did not start ({mode}): {line!r}; see {tmp}/stderr.log")
    port = int(line.strip().rsplit(":", 1)[1])
    duration = int(edits * 0.6 + 10)
    wrk = subprocess.Popen(["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--latency",
                            f"http://127.0.0.1:{port}/"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(2)
    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies, probe_failures, probe_requests = [], [], 0
    for n in range(1, edits + 1):
        version = f"v{n}"
        with open(os.path.join(app, "version.php"), "w") as f:
            f.write(f"<?php return '{version}';\n")
        t0 = time.monotonic()
        while True:
            try:
                probe.request("GET", "/")
                r = probe.getresponse()
                body = r.read().decode()
                probe_requests += 1
                if r.status != 200:
                    probe_failures.append(f"status {r.status}")
                elif body.startswith(version + " "):
                    break
            except Exception as e:  # noqa: BLE001 - counted
                probe_failures.append(repr(e))
                probe.close()
                probe = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            if time.monotonic() - t0 > 10:
                probe_failures.append(f"{version} not served within 10 s")
                break
        latencies.append((time.monotonic() - t0) * 1000)
        time.sleep(0.3)  # the old workers finish retiring before the next edit
    probe.close()
    out = wrk.communicate(timeout=duration + 30)[0].decode()
    proc.terminate()
    proc.wait(30)
    err.close()
    reqs = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", out)) else 0
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    sock_errors = sum(int(x) for x in sock.groups()) if sock else 0
    p99 = re.search(r"99%\s+(\S+)", out)
    with open(os.path.join(tmp, "stderr.log")) as f:
        resets = f.read().count("rolling reset (") // 2  # "replacing" + "done" per reset
    return {
        "mode": mode, "p50": percentile(latencies, 50), "p99": percentile(latencies, 99), "max": max(latencies),
        "wrk_requests": reqs, "non2xx": non2xx, "socket_errors": sock_errors, "wrk_p99": p99.group(1) if p99 else "?",
        "probe_requests": probe_requests, "probe_failures": probe_failures, "edits": edits, "resets": resets,
        "tmp": tmp,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edits", type=int, default=50)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "ferry"))
    ap.add_argument("--modes", default="exec,fork")
    args = ap.parse_args()
    rows = [run_mode(args.bin, m, args.edits, args.connections) for m in args.modes.split(",")]
    cmd = "python3 bench/reload.py " + " ".join(sys.argv[1:])
    lines = [f"# Hot reload under load\n", f"`{cmd.strip()}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); "
             f"{args.edits} edits of version.php, wrk -t2 -c{args.connections} throughout, 2 workers, "
             "reload.interval 100ms.\n",
             "| workers started by | edit → new code p50 | p99 | max | resets | wrk requests | wrk p99 | non-2xx | socket errors | probe failures |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {'fork (http.pool.fork)' if r['mode'] == 'fork' else 'exec (each boots PHP)'} | "
                     f"{r['p50']:.0f} ms | {r['p99']:.0f} ms | {r['max']:.0f} ms | {r['resets']} | {r['wrk_requests']} | "
                     f"{r['wrk_p99']} | {r['non2xx']} | {r['socket_errors']} | {len(r['probe_failures'])} |")
    for r in rows:
        if r["probe_failures"]:
            lines.append(f"- {r['mode']}: probe failures: {r['probe_failures'][:5]}")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "reload.md"), "w") as f:
        f.write(text)
    bad = any(r["non2xx"] or r["socket_errors"] or r["probe_failures"] for r in rows)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
