"""What the Python benchmarks share: starting a ferry on free ports and reading its /metrics."""
import http.client
import os
import re
import subprocess
import threading
import time


def serve(binary, config, tmp):
    """Starts `binary serve` with the YAML text `config` (its http and metrics addresses on port 0) in the
    directory tmp. Returns (process, http port, metrics port or None, stderr log path); raises RuntimeError
    with the server's stderr if it does not come up."""
    cfg = os.path.join(tmp, "ferry.yaml")
    with open(cfg, "w") as f:
        f.write(config)
    err_path = os.path.join(tmp, "stderr.log")
    err = open(err_path, "w+")
    proc = subprocess.Popen([binary, "serve", "-c", cfg], stdout=subprocess.PIPE, stderr=err, text=True)
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
