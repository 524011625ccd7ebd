"""What the Python benchmarks share: the hello-world config, starting and stopping a ferry on free ports,
reading its /metrics, and checking for the tools a script needs."""
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL_HINTS = {"wrk": "bash scripts/setup.sh --bench installs it", "perf": "apt-get install linux-perf"}


def require(prog, binaries=(), tools=()):
    """Exits with a message naming `prog` unless every binary is executable and every tool on PATH."""
    for b in binaries:
        if not os.access(b, os.X_OK):
            sys.exit(f"{prog}: {b} not found or not executable: build it first (cmake --build build --target ferry)")
    for t in tools:
        if shutil.which(t) is None:
            sys.exit(f"{prog}: {t} not found ({TOOL_HINTS.get(t, 'install it')})")


def add_hello_args(ap, max_jobs=10000):
    """The options of a script that runs the hello-world server: --ferry, --max-jobs, --fork, --workers."""
    ap.add_argument("--ferry", default=os.path.join(ROOT, "build", "ferry"))
    ap.add_argument("--max-jobs", type=int, default=max_jobs)
    ap.add_argument("--fork", action="store_true", help="fork: true (workers forked from a template)")
    ap.add_argument("--workers", type=int, default=2)


def hello_config(workers, max_jobs, fork, extra="", io_threads=None):
    """The benchmarks' hello-world server (tests/php/hello.php, opcache on) as ferry YAML, on a free port;
    `extra` is appended (top-level keys such as metrics: or logs:); io_threads None leaves ferry's default."""
    loops = "" if io_threads is None else f"\n  io_threads: {io_threads}"
    return f"""version: "3"
server:
  command: "php -d opcache.enable=1 -d opcache.enable_cli=1 {ROOT}/tests/php/hello.php"
http:
  address: 127.0.0.1:0{loops}
  pool:
    num_workers: {workers}
    max_jobs: {max_jobs}
    fork: {"true" if fork else "false"}
""" + extra


def stop(proc, timeout=30):
    """SIGTERM, then SIGKILL if the server has not ended within `timeout` seconds."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def serve(binary, config, tmp, env=None):
    """Starts `binary serve` with the YAML text `config` (its http and metrics addresses on port 0) in the
    directory tmp (`env`: its environment, default ours). Returns (process, http port, metrics port or None,
    stderr log path); raises RuntimeError with the server's stderr if it does not come up."""
    cfg = os.path.join(tmp, "ferry.yaml")
    with open(cfg, "w") as f:
        f.write(config)
    err_path = os.path.join(tmp, "stderr.log")
    err = open(err_path, "w+")
    proc = subprocess.Popen([binary, "serve", "-c", cfg], stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    port = None
    for line in proc.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    if port is None:
        proc.wait()
        err.seek(0)
        raise RuntimeError("ferry did not start:\n" + err.read())
    mport = None
    if re.search(r"^metrics:", config, re.M):
        for _ in range(50):  # the metrics line is logged as the listener opens, about when http's is printed
            err.seek(0)
            m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", err.read())
            if m:
                mport = int(m.group(1))
                break
            time.sleep(0.1)
        if mport is None:
            proc.terminate()
            raise RuntimeError("ferry logged no metrics address within 5 s")
    err.close()
    return proc, port, mport, err_path


def metrics_text(port, timeout=10):
    """The text of one GET /metrics."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", "/metrics")
        return c.getresponse().read().decode()
    finally:
        c.close()


def rss(pid):
    """The resident memory of process `pid` in bytes (/proc/PID/statm), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def children(pid):
    """The pids whose parent is `pid` (one pass over /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out
