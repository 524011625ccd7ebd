"""Shared harness for Ferry's end-to-end tests (stdlib only).

Starts the built `ferry` binary with a temporary config on 127.0.0.1:0, waits for the
"listening on http://127.0.0.1:PORT" line, captures stderr to a file, and on stop sends
SIGTERM, asserts exit code 0 and that no PHP worker of that server remains. Workers are
found through a unique marker put into server.env and read back from /proc/PID/environ.

Environment: FERRY_BIN (path of the ferry binary), FERRY_ROOT (source tree root),
FERRY_E2E_IO_THREADS (http.io_threads for every server whose test does not set it: the test
command runs the suite with 1 and with 2 event loops).
"""

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

from clients import (HOST, SOCK_TIMEOUT, Reader, Response, Rpc, goridge_frame, metric, metrics_address,  # noqa: F401
                     probe_get, raw_exchange, read_goridge_frame, scrape)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("FERRY_ROOT") or os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("FERRY_BIN") or os.path.join(ROOT, "build", "ferry")
PHP_DIR = os.path.join(ROOT, "tests", "php")
E2E_PHP_DIR = os.path.join(HERE, "php")
MARK_VAR = "FERRY_E2E_MARK"

IO_THREADS = int(os.environ.get("FERRY_E2E_IO_THREADS") or "1")


def php(script):
    """server.command for a fixture in tests/php (or an absolute path)."""
    path = script if os.path.isabs(script) else os.path.join(PHP_DIR, script)
    return "php " + path


# ---------------------------------------------------------------------------------------------
# YAML (a tiny emitter: nested dicts, lists, strings, ints, bools)

def _scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(str(v))  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(data, indent=0):
    pad = "  " * indent
    lines = []
    for k, v in data.items():
        if isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            lines.append(to_yaml(v, indent + 1))
        elif isinstance(v, list):
            lines.append(f"{pad}{k}:")
            for item in v:
                if isinstance(item, dict):  # a map in a list (http.ssl.certs): "- " then its keys below it
                    lines.append(f"{pad}  -")
                    lines.append(to_yaml(item, indent + 2))
                else:
                    lines.append(f"{pad}  - {_scalar(item)}")
        else:
            lines.append(f"{pad}{k}: {_scalar(v)}")
    return "\n".join(line for line in lines if line != "")


def deep_merge(base, extra):
    out = dict(base)
    for k, v in (extra or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------------------------------------
# /proc scanning

def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("latin-1")
    except OSError:
        return None, None
    # comm may contain spaces and parentheses: split after the last ')'
    rest = data[data.rfind(")") + 2:].split()
    return rest[0], int(rest[1])  # state, ppid


def read_listening_line(proc, timeout, lines=None):
    """Waits at most `timeout` seconds for ferry's "listening on http://..." line on proc's stdout, reading
    the pipe itself (select, os.read: a plain readline() would wait for good on a server that never prints
    it). Lines before it go to `lines`. Returns (the line or None if the process ended or the time ran out,
    the bytes read after it: not yet a line, or lines for whoever reads stdout next)."""
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], max(0.0, min(0.2, deadline - time.monotonic())))
        if not r:
            if proc.poll() is not None:
                return None, buf
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return None, buf
        buf += chunk
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            text = raw.decode("utf-8", "replace").strip()
            if lines is not None:
                lines.append(text)
            if text.startswith("listening on http://"):
                return text, buf
    return None, buf


def pids_with_marker(marker):
    """Live (non-zombie) processes whose environment holds MARK_VAR=marker."""
    needle = f"{MARK_VAR}={marker}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            state, _ = _proc_state(pid)
            if state is not None and state != "Z":
                found.append(pid)
    return sorted(found)


def children_of(ppid):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            state, parent = _proc_state(int(name))
            if parent == ppid and state != "Z":
                out.append(int(name))
    return sorted(out)


def rss_kib(pid, field="VmRSS"):
    """A process's memory in KiB from /proc/PID/status: VmRSS now, or VmHWM (its peak)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def wait_until(predicate, timeout, interval=0.05):
    """Polls predicate() until it is truthy or timeout seconds pass; returns its last value."""
    deadline = time.monotonic() + timeout
    value = predicate()
    while not value and time.monotonic() < deadline:
        time.sleep(interval)
        value = predicate()
    return value


# ---------------------------------------------------------------------------------------------
# The server under test

def run_ferry(*args, timeout=15):
    """The binary run once with `args` (a CLI command): the CompletedProcess, text output."""
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def assert_clean_stop(stderr):
    """A stop is cancel and join: every task on every loop ended by itself (LoopThreads warns otherwise); and
    no worker was asked for a move its tables do not have (Worker::to, Worker::recycle_to: a pool bug)."""
    if "still had work" in stderr:
        raise AssertionError(f"a task outlived the stop (an event loop was stopped with work in it):\n{stderr}")
    for bug in (": no move from ", ": no recycling move from "):
        if bug in stderr:
            raise AssertionError(f"a worker was asked for a move its table does not have:\n{stderr}")


class Server:
    """One ferry process. `config` is merged over a default echo.php config."""

    def __init__(self, config=None, script="echo.php", env=None, args=None, command="serve", prefix=None):
        self.prefix = list(prefix or [])  # a command that runs ferry (setpriv ...): its pid becomes ferry's
        self.marker = uuid.uuid4().hex
        self.tmp = tempfile.TemporaryDirectory(prefix="ferry-e2e-")
        base = {
            "version": "3",
            "server": {"command": php(script), "env": {MARK_VAR: self.marker}},
            "http": {
                "address": f"{HOST}:0",
                "io_threads": IO_THREADS,
                "pool": {"num_workers": 2, "allocate_timeout": "10s", "destroy_timeout": "10s"},
            },
        }
        cfg = deep_merge(base, config or {})
        cfg["server"]["env"] = dict(cfg["server"].get("env") or {}, **{MARK_VAR: self.marker}, **(env or {}))
        self.config = cfg
        self.config_path = self.path("ferry.yaml")
        with open(self.config_path, "w") as f:
            f.write(to_yaml(cfg) + "\n")
        self.args = list(args or [])
        self.command = command
        self.stderr_path = self.path("stderr.log")
        self.proc = None
        self.term_sent = False
        self.port = None
        self.stdout_lines = []
        self._stdout_rest = b""
        self._stdout_thread = None

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, timeout=15.0):
        self._stderr_file = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            self.prefix + [BIN, self.command, "-c", self.config_path] + self.args,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr_file,
            cwd=self.tmp.name)
        line, self._stdout_rest = read_listening_line(self.proc, timeout, self.stdout_lines)
        if line is None:
            rc = self.proc.poll()
            self.kill()
            raise AssertionError(f"ferry did not print the listening line within {timeout}s "
                                 f"(exit code {rc}); stderr:\n{self.stderr()}")
        self.port = int(line.rsplit(":", 1)[1])
        self.address = f"{HOST}:{self.port}"
        self._stdout_thread = threading.Thread(target=self._drain_stdout, daemon=True)
        self._stdout_thread.start()
        return self

    def _drain_stdout(self):
        # Read with the listening line: whole lines, then maybe the start of the next one.
        *done, rest = self._stdout_rest.split(b"\n")
        self.stdout_lines.extend(raw.decode("utf-8", "replace") for raw in done)
        try:
            for raw in self.proc.stdout:
                raw, rest = rest + raw, b""
                self.stdout_lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
        except (OSError, ValueError):
            pass
        if rest:
            self.stdout_lines.append(rest.decode("utf-8", "replace"))

    def terminate(self):
        """Sends SIGTERM once (a second one makes ferry stop at once, with exit code 1)."""
        self.term_sent = True
        self.proc.send_signal(signal.SIGTERM)

    def workers(self):
        return pids_with_marker(self.marker)

    def stop(self, timeout=15.0, expect_code=0):
        """SIGTERM, wait, assert the exit code and that no worker of this server remains."""
        if self.proc is None:
            return None
        if self.proc.poll() is None and not self.term_sent:
            self.terminate()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"ferry did not exit within {timeout}s of SIGTERM; stderr:\n{self.stderr()}")
        left = wait_until(lambda: not self.workers(), 3.0)
        leftovers = self.workers()
        self._cleanup()
        if expect_code is not None and rc != expect_code:
            raise AssertionError(f"ferry exited with {rc}, expected {expect_code}; stderr:\n{self.stderr()}")
        if not left:
            raise AssertionError(f"PHP workers still running after ferry exited: {leftovers}")
        assert_clean_stop(self.stderr())
        return rc

    def kill(self):
        """Best-effort cleanup: SIGKILL ferry and any process carrying our marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.workers():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self._cleanup()

    def _cleanup(self):
        f = getattr(self, "_stderr_file", None)
        if f and not f.closed:
            f.close()
        if self._stdout_thread is not None:
            self._stdout_thread.join(2)
        if self.proc is not None and self.proc.stdout and self.proc.poll() is not None:
            try:
                self.proc.stdout.close()
            except OSError:
                pass

    def close(self):
        """Removes the temporary directory (config, logs); a server still running is killed first, so that a
        test that forgot to stop it leaves no process behind."""
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
        self.tmp.cleanup()

    # -- logs -------------------------------------------------------------------------------

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_for_log(self, text, timeout=5.0):
        """True once `text` appears in stderr (within timeout seconds)."""
        return bool(wait_until(lambda: text in self.stderr(), timeout))

    # -- clients ----------------------------------------------------------------------------

    def conn(self, timeout=SOCK_TIMEOUT):
        return http.client.HTTPConnection(HOST, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=SOCK_TIMEOUT):
        """One request on a fresh connection: (status, headers list, body bytes)."""
        c = self.conn(timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            data = r.read()
            return r.status, r.getheaders(), data
        finally:
            c.close()

    def get_json(self, path, **kw):
        status, headers, body = self.request("GET", path, **kw)
        if status != 200:
            raise AssertionError(f"GET {path}: status {status}, body {body!r}")
        return json.loads(body)

    def socket(self, timeout=SOCK_TIMEOUT):
        s = socket.create_connection((HOST, self.port), timeout=timeout)
        s.settimeout(timeout)
        return s

    def curl(self, *args, timeout=20):
        """Runs real curl; returns CompletedProcess (stdout bytes)."""
        return subprocess.run(["curl", "-sS", "--max-time", "15", *args], capture_output=True, timeout=timeout)

    def url(self, path):
        return f"http://{self.address}{path}"

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.stop()
            else:
                self.kill()
        finally:
            self.close()
        return False


# ---------------------------------------------------------------------------------------------
# Raw HTTP/1.1 response reading

# ---------------------------------------------------------------------------------------------
# unittest base class: one shared server per test class

class ServerTestCase(unittest.TestCase):
    CONFIG = None
    SCRIPT = "echo.php"
    ENV = None
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(cls.CONFIG, script=cls.SCRIPT, env=cls.ENV).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            srv, cls.server = cls.server, None
            try:
                srv.stop()
            finally:
                srv.close()

    def setUp(self):
        self._sockets = []

    def tearDown(self):
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass

    def raw(self, data, head_request=False, server=None, timeout=SOCK_TIMEOUT):
        """Sends raw bytes on a fresh connection and reads one response: (Response, Reader)."""
        s = self.sock(server, timeout)
        s.sendall(data)
        rd = Reader(s)
        return rd.read_response(head_request=head_request), rd

    def sock(self, server=None, timeout=SOCK_TIMEOUT):
        s = (server or self.server).socket(timeout)
        self._sockets.append(s)
        return s

    def start_server(self, config=None, script="echo.php", env=None, args=None):
        """A dedicated server for one test, stopped (and checked) at cleanup unless stopped before."""
        srv = Server(config, script=script, env=env, args=args).start()

        def cleanup():
            try:
                if srv.proc is not None and srv.proc.poll() is None:
                    srv.stop()
                else:
                    srv.kill()
            finally:
                srv.close()
        self.addCleanup(cleanup)
        return srv


def http_get(server, path, results, key, timeout=10):
    """Thread body: GET path, store (status, headers dict, body, seconds) or the exception."""
    t0 = time.monotonic()
    try:
        status, headers, body = server.request("GET", path, timeout=timeout)
        results[key] = (status, dict(headers), body, time.monotonic() - t0)
    except Exception as e:  # noqa: BLE001 - reported by the test
        results[key] = e
