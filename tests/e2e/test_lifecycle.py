"""Process lifecycle: graceful SIGTERM with requests in flight, SIGKILL, config errors, `ferry config`, -o overrides,
the PSR-7 bridge."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (http_get, BIN, HOST, MARK_VAR, Reader, Server, ServerTestCase, php, pids_with_marker,
                     read_listening_line, wait_until)


def run_ferry(*args, timeout=15):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


class ShutdownTest(unittest.TestCase):
    def start(self, config=None, **kw):
        srv = Server(config, **kw)
        self.addCleanup(srv.close)
        self.addCleanup(srv.kill)
        return srv.start()

    def test_sigterm_with_requests_in_flight(self):
        srv = self.start({"http": {"pool": {"num_workers": 2}}})
        workers = srv.workers()
        self.assertEqual(len(workers), 2)
        results = {}
        threads = [threading.Thread(target=http_get, args=(srv, f"/sleep?ms=1500&i={i}", results, i))
                   for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        srv.terminate()
        # the listener closes at once: new connections are refused
        time.sleep(0.2)
        with self.assertRaises(OSError):
            socket.create_connection((HOST, srv.port), timeout=2).close()
        for t in threads:
            t.join(15)
        self.assertFalse(any(t.is_alive() for t in threads))
        connection = []
        for i in range(4):
            self.assertIsInstance(results[i], tuple, f"request {i}: {results[i]!r}")
            status, headers, body, _ = results[i]
            self.assertEqual(status, 200, f"request {i}: {body!r}")
            d = json.loads(body)
            self.assertEqual((d["path"], d["rawQuery"]), ("/sleep", f"ms=1500&i={i}"))
            self.assertIn(d["pid"], workers)
            connection.append(headers.get("Connection"))
        rc = srv.stop(timeout=10)  # asserts exit 0 and no PHP worker left
        self.assertEqual(rc, 0)
        # two rounds of 1.5 s requests on two workers: about 3 s, not destroy_timeout (10 s)
        self.assertLess(time.monotonic() - t0, 6)
        self.assertIn("received SIGTERM", srv.stderr())
        # the server is draining: answers tell the client the connection ends (as Go's Shutdown does)
        self.assertEqual(connection, ["close"] * 4)

    def test_sigterm_idle_keep_alive_connection_closed(self):
        srv = self.start()
        s = socket.create_connection((HOST, srv.port), timeout=5)
        self.addCleanup(s.close)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        self.assertEqual(rd.read_response().status, 200)
        t0 = time.monotonic()
        srv.stop(timeout=10)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertTrue(rd.closed_by_peer(1))

    def test_sigterm_idle_server_fast(self):
        srv = self.start({"http": {"pool": {"num_workers": 3}}})
        self.assertEqual(len(srv.workers()), 3)
        t0 = time.monotonic()
        self.assertEqual(srv.stop(timeout=10), 0)
        self.assertLess(time.monotonic() - t0, 3)

    def test_sigkill_leaves_no_worker(self):
        srv = self.start({"http": {"pool": {"num_workers": 3}}})
        workers = srv.workers()
        self.assertEqual(len(workers), 3)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(5)
        gone = wait_until(lambda: not pids_with_marker(srv.marker), 3.0)
        self.assertTrue(gone, f"PHP workers survived SIGKILL of ferry: {pids_with_marker(srv.marker)}")

    def test_sigterm_while_workers_boot(self):
        # The listening line never comes: workers need 3 s to boot; SIGTERM must stop it anyway.
        srv = Server({"http": {"pool": {"num_workers": 2}}},
                     script=os.path.join(os.path.dirname(os.path.abspath(__file__)), "php", "slow_boot.php"))
        self.addCleanup(srv.close)
        srv._stderr_file = open(srv.stderr_path, "wb")
        srv.proc = subprocess.Popen([BIN, "serve", "-c", srv.config_path], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=srv._stderr_file, cwd=srv.tmp.name)
        self.assertTrue(wait_until(lambda: len(pids_with_marker(srv.marker)) == 2, 5.0), "workers not spawned")
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(10)
        self.assertEqual(code, 0, srv.stderr())
        self.assertLess(time.monotonic() - t0, 3.0, "it waited for the boot instead of stopping")
        self.assertIn("while starting", srv.stderr())
        self.assertTrue(wait_until(lambda: not pids_with_marker(srv.marker), 3.0), pids_with_marker(srv.marker))

    def test_second_sigterm_with_requests_in_flight_stops_at_once(self):
        # Issue 5 item 6: this crashed (heap-use-after-free under ASan, SIGSEGV in Release).
        srv = self.start({"http": {"pool": {"num_workers": 2, "destroy_timeout": "30s"}}})
        results = {}
        threads = [threading.Thread(target=http_get, args=(srv, "/sleep?ms=5000", results, i, 10)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        srv.proc.send_signal(signal.SIGTERM)
        code = srv.proc.wait(10)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertEqual(code, 1, srv.stderr())
        self.assertIn("second signal: stopping now", srv.stderr())
        self.assertIn("second signal, killing it", srv.stderr())
        self.assertNotIn("AddressSanitizer", srv.stderr())
        for t in threads:
            t.join(5)
        self.assertTrue(wait_until(lambda: not pids_with_marker(srv.marker), 3.0), pids_with_marker(srv.marker))
        srv.term_sent = True

    def test_sigkill_during_request_leaves_no_worker(self):
        srv = self.start({"http": {"pool": {"num_workers": 1}}})
        results = {}
        t = threading.Thread(target=http_get, args=(srv, "/sleep?ms=2000", results, 0, 5))
        t.start()
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait(5)
        t.join(6)
        self.assertTrue(wait_until(lambda: not pids_with_marker(srv.marker), 3.0), pids_with_marker(srv.marker))


class ConfigTest(unittest.TestCase):
    def tmpfile(self, name, text):
        d = tempfile.TemporaryDirectory(prefix="ferry-e2e-conf-")
        self.addCleanup(d.cleanup)
        path = os.path.join(d.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_invalid_value_names_line_and_key(self):
        path = self.tmpfile("bad.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                        'http:\n  address: 127.0.0.1:0\n  pool:\n    num_workers: many\n')
        p = run_ferry("serve", "-c", path)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(p.stdout, "")
        self.assertIn("bad.yaml:7:", p.stderr)
        self.assertIn("http.pool.num_workers", p.stderr)
        self.assertIn('"many"', p.stderr)

    def test_bad_duration_names_key(self):
        path = self.tmpfile("dur.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                        'http:\n  timeouts:\n    idle: soon\n')
        p = run_ferry("config", "-c", path)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("dur.yaml:6:", p.stderr)
        self.assertIn("http.timeouts.idle", p.stderr)

    def test_value_not_utf8_is_refused_naming_line_and_key(self):
        # It loaded, and `ferry config` dumped the bad byte as U+FFFD: a different config (fuzz/config).
        path = self.tmpfile("utf8.yaml", "")
        with open(path, "wb") as f:
            f.write(f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'.encode()
                    + b"metrics:\n  address: 127\xbb0.0.1:2112\n")
        for command in (["config"], ["serve", "--dry-run"]):
            p = run_ferry(*command, "-c", path)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertEqual(p.stdout, "")
            self.assertIn(f'{path}:5:12: metrics.address: "127\\xbb0.0.1:2112" is not valid UTF-8 (byte 0xbb at '
                          "offset 3)", p.stderr)

    def test_missing_config_file(self):
        p = run_ferry("serve", "-c", "/nonexistent/ferry-e2e.yaml")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("/nonexistent/ferry-e2e.yaml", p.stderr)

    def test_config_file_not_regular_or_too_large_is_refused_at_once(self):
        # /dev/zero was read until std::bad_alloc (2 GB in), a FIFO blocked forever, 100 MB took 6.8 s.
        d = tempfile.TemporaryDirectory(prefix="ferry-e2e-conf-")
        self.addCleanup(d.cleanup)
        fifo = os.path.join(d.name, "fifo.yaml")
        os.mkfifo(fifo)
        big = self.tmpfile("big.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                       "# " + "x" * (5 << 20) + "\n")
        cases = [("/dev/zero", "it is a character device, not a regular file"),
                 (fifo, "it is a FIFO, not a regular file"),
                 (d.name, "it is a directory, not a regular file"),
                 (big, f"it is {os.path.getsize(big)} bytes, more than the 4 MiB a configuration file may have")]
        for path, why in cases:
            for command in (["config"], ["serve", "--dry-run"], ["serve"]):
                with self.subTest(path=path, command=command):
                    start = time.monotonic()
                    p = run_ferry(*command, "-c", path, timeout=5)
                    self.assertLess(time.monotonic() - start, 2.0)
                    self.assertEqual(p.returncode, 1, p.stderr)
                    self.assertEqual(p.stdout, "")
                    self.assertEqual(p.stderr.strip(),
                                     f"ferry: config error: {path}: cannot read the configuration file: {why}")

    def test_status_and_metrics_on_every_interface_are_warned(self):
        # ":2114" listened on 0.0.0.0 without a word; the RPC listener refuses that without rpc.allow_remote.
        path = self.tmpfile("any.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                        'status:\n  address: ":2114"\nmetrics:\n  address: "127.0.0.1:2112"\n')
        for command in (["config"], ["serve", "--dry-run"]):
            p = run_ferry(*command, "-c", path, "-o", 'metrics.address="[::]:2112"')
            self.assertEqual(p.returncode, 0, p.stderr)
            warnings = [l for l in p.stderr.splitlines() if "listens on every interface" in l]
            self.assertEqual(len(warnings), 2, p.stderr)
            self.assertIn(f'{path}:5:12: status.address ":2114" listens on every interface (0.0.0.0), reachable '
                          'from other machines; write "127.0.0.1:2114" to keep it local', warnings[0])
            self.assertIn('(from -o): metrics.address "[::]:2112" listens on every interface (::), reachable from '
                          'other machines; write "[::1]:2112" to keep it local', warnings[1])
            self.assertIn("warn", warnings[0].lower())
        local = self.tmpfile("local.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                           'status:\n  address: "127.0.0.1:2114"\n')
        p = run_ferry("config", "-c", local)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("every interface", p.stderr)

    def test_help_prints_the_usage_and_exits_0(self):
        for args in (["--help"], ["help"], ["-h"], ["serve", "--help"], ["config", "-h"], ["workers", "--help"]):
            p = run_ferry(*args)
            self.assertEqual(p.returncode, 0, (args, p.stderr))
            self.assertTrue(p.stdout.startswith("usage: ferry <command> [options]"), (args, p.stdout[:200]))
            self.assertIn("--config FILE", p.stdout)
            self.assertEqual(p.stderr, "")

    def test_strict_makes_unknown_and_unsupported_keys_errors(self):
        path = self.tmpfile("typo.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                         'http:\n  adress: 127.0.0.1:0\n  http3: {{}}\n')
        p = run_ferry("config", "-c", path)
        self.assertEqual(p.returncode, 0, p.stderr)  # warnings by default
        self.assertIn('unknown key "http.adress" (ignored); did you mean "http.address"?', p.stderr)
        for args in (["config", "--strict", "-c", path], ["serve", "--strict", "-c", path]):
            p = run_ferry(*args)
            self.assertEqual(p.returncode, 1, (args, p.stderr))
            self.assertIn(f'ferry: config error (--strict): {path}:5:3: unknown key "http.adress"', p.stderr)
            self.assertIn('key "http.http3" is recognised but not supported yet', p.stderr)
            self.assertEqual(p.stdout, "")

    def test_a_missing_worker_script_is_one_message_naming_it(self):
        path = self.tmpfile("missing.yaml", 'version: "3"\nserver:\n  command: "php -d x=1 no-such-worker.php"\n'
                                            'http:\n  address: 127.0.0.1:0\n')
        workdir = os.path.dirname(path)
        p = run_ferry("serve", "-w", workdir, "-c", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"server.command: cannot open no-such-worker.php (in {os.path.realpath(workdir)}): "
                      "No such file or directory", p.stderr)
        self.assertNotIn("failed to boot", p.stderr)  # found before any worker starts
        self.assertEqual(p.stderr.count("no-such-worker.php"), 1, p.stderr)

    def test_http_ssl_is_refused(self):
        path = self.tmpfile("tls.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                        'http:\n  address: 127.0.0.1:0\n  ssl:\n    address: 127.0.0.1:0\n'
                                        '    cert: a.crt\n    key: a.key\n')
        p = run_ferry("serve", "-c", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{path}:6:3: http.ssl: TLS is not supported yet", p.stderr)
        self.assertNotIn("listening", p.stdout + p.stderr)

    def test_an_rpc_port_in_use_names_the_key_and_no_library_internals(self):
        # (http.address, status.address and metrics.address: test_loops, test_status, test_metrics)
        held = socket.socket()
        self.addCleanup(held.close)
        held.bind((HOST, 0))
        held.listen()
        port = held.getsockname()[1]
        path = self.tmpfile("rpc.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                        f'http:\n  address: {HOST}:0\nrpc:\n  listen: tcp://{HOST}:{port}\n')
        p = run_ferry("serve", "-c", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f'ERROR core: rpc.listen: cannot listen on "tcp://{HOST}:{port}": Address already in use\n',
                      p.stderr)
        for internal in ("bind:", "asio", "boost", "system:98"):
            self.assertNotIn(internal, p.stderr)
        self.assertNotIn("listening", p.stdout)

    def test_unknown_option_usage_error(self):
        p = run_ferry("serve", "--no-such-option")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--no-such-option", p.stderr)

    def test_config_prints_effective_config(self):
        path = self.tmpfile("ok.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                       '  env:\n    my_var: "x-${FERRY_E2E_UNSET:-dflt}"\n'
                                       'http:\n  address: 127.0.0.1:0\n  max_request_size: 2\n'
                                       '  timeouts:\n    idle: 1m30s\n  pool:\n    num_workers: 2\n'
                                       '    max_jobs: 7\n    allocate_timeout: 500ms\n')
        p = run_ferry("config", "-c", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout
        lines = [l.strip() for l in out.splitlines()]
        self.assertIn("num_workers: 2", lines)
        self.assertIn("max_jobs: 7", lines)
        self.assertIn("allocate_timeout: 500ms", lines)
        self.assertTrue({"idle: 1m30s", "idle: 90s"} & set(lines), lines)
        self.assertIn("max_request_size: 2097152B", lines)
        self.assertIn('"MY_VAR": "x-dflt"', lines)
        self.assertIn('- "php"', lines)
        self.assertIn(f'- "{os.path.join(os.path.dirname(php("echo.php")[4:]), "echo.php")}"', lines)
        # the dump is itself a valid config that loads to the same thing
        again = self.tmpfile("again.yaml", out)
        p2 = run_ferry("config", "-c", again)
        self.assertEqual(p2.returncode, 0, p2.stderr)
        self.assertEqual(p2.stdout, out)
        # serve --dry-run prints the same and starts nothing
        p3 = run_ferry("serve", "--dry-run", "-c", path)
        self.assertEqual((p3.returncode, p3.stdout), (0, out))

    def test_override_in_config(self):
        path = self.tmpfile("o.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                      'http:\n  pool:\n    num_workers: 2\n')
        p = run_ferry("config", "-c", path, "-o", "http.pool.num_workers=3", "-o", "http.address=127.0.0.1:0")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [l.strip() for l in p.stdout.splitlines()]
        self.assertIn("num_workers: 3", lines)
        self.assertIn('address: "127.0.0.1:0"', lines)

    def test_zero_workers_means_the_cpus_this_process_may_use(self):
        path = self.tmpfile("cpus.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                         'http:\n  pool:\n    num_workers: 0\n')
        usable = len(os.sched_getaffinity(0))
        p = run_ferry("config", "-c", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"num_workers: {usable}", [l.strip() for l in p.stdout.splitlines()])
        # Pinned to one CPU (taskset, as a cgroup cpuset would): one worker, whatever the machine has.
        p = subprocess.run(["taskset", "-c", str(min(os.sched_getaffinity(0))), BIN, "config", "-c", path],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("num_workers: 1", [l.strip() for l in p.stdout.splitlines()])

    def test_override_bad_key_value(self):
        path = self.tmpfile("o2.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n')
        p = run_ferry("config", "-c", path, "-o", "http.pool.num_workers=lots")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("http.pool.num_workers", p.stderr)

    def test_override_serves_with_3_workers(self):
        srv = Server({"http": {"pool": {"num_workers": 1}}}, args=["-o", "http.pool.num_workers=3"])
        self.addCleanup(srv.close)
        self.addCleanup(srv.kill)
        srv.start()
        self.assertEqual(len(srv.workers()), 3, srv.workers())
        self.assertTrue(srv.wait_for_log("with 3 worker(s)"), srv.stderr())
        # three concurrent slow requests land on three distinct workers
        results = {}
        threads = [threading.Thread(target=http_get, args=(srv, "/sleep?ms=400", results, i)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        pids = {json.loads(results[i][2])["pid"] for i in range(3)}
        self.assertEqual(pids, set(srv.workers()))
        srv.stop()

    def test_server_env_reaches_workers(self):
        srv = Server({"server": {"env": {"lower_key": "v1"}}})
        self.addCleanup(srv.close)
        self.addCleanup(srv.kill)
        srv.start()
        pid = srv.workers()[0]
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        self.assertEqual(env.get(b"LOWER_KEY"), b"v1")  # keys upper-cased
        self.assertEqual(env.get(b"RR_RELAY"), b"pipes")
        self.assertEqual(env.get(b"RR_MODE"), b"http")
        self.assertEqual(env.get(MARK_VAR.encode()), srv.marker.encode())
        srv.stop()


# A worker that answers with its working directory and what it reads from the environment.
ENV_WORKER = """<?php
require getenv('FERRY_PHP_WORKER') . '/autoload.php';
$worker = Ferry\\Worker\\Worker::create();
while ($req = $worker->waitRequest()) {
    $worker->respond(200, ['Content-Type' => 'application/json'], json_encode([
        'cwd' => getcwd(), 'greeting' => getenv('GREETING'), 'set' => getenv('FERRY_E2E_SET'),
    ]));
}
"""


class WorkingDirectoryAndDotenvTest(unittest.TestCase):
    """As RoadRunner: without -w the working directory is the config file's; --dotenv / DOTENV_PATH."""

    def app(self, dotenv=None):
        d = tempfile.mkdtemp(prefix="ferry-e2e-wd-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        with open(os.path.join(d, "worker.php"), "w") as f:
            f.write(ENV_WORKER)
        with open(os.path.join(d, ".rr.yaml"), "w") as f:
            f.write('version: "3"\nserver:\n  command: "php worker.php"\n  env:\n    GREETING: ${GREETING:-none}\n'
                    'http:\n  address: ${FERRY_E2E_ADDR:-127.0.0.1:0}\n  pool:\n    num_workers: 1\n')
        if dotenv is not None:
            with open(os.path.join(d, ".env"), "w") as f:
                f.write(dotenv)
        return d

    def serve(self, args, cwd, env=None):
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen([BIN, "serve", *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err, env=dict(os.environ, **(env or {})))

        def stop():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait(20)
            proc.stdout.close()
            err.close()
        self.addCleanup(stop)
        line, _ = read_listening_line(proc, 15)
        err.seek(0)
        log = err.read().decode()
        self.assertIsNotNone(line, log)
        port = int(line.rsplit(":", 1)[1])
        with socket.create_connection((HOST, port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            r = Reader(s).read_response()
        self.assertEqual(r.status, 200, log)
        err.seek(0)
        return json.loads(r.body), err.read().decode()

    def test_the_working_directory_is_the_config_files(self):
        app = self.app()
        seen, _ = self.serve(["-c", os.path.join(app, ".rr.yaml")], cwd="/")
        self.assertEqual(seen["cwd"], os.path.realpath(app))  # php worker.php found there, from /
        self.assertEqual(seen["greeting"], "none")
        # relative to the directory ferry starts in, too
        seen, _ = self.serve(["-c", os.path.relpath(os.path.join(app, ".rr.yaml"), "/tmp")], cwd="/tmp")
        self.assertEqual(seen["cwd"], os.path.realpath(app))

    def test_dotenv_sets_what_the_environment_lacks(self):
        app = self.app("# the app's settings\nGREETING='hello from .env'\nFERRY_E2E_SET=from-file\n"
                       "FERRY_E2E_ADDR=127.0.0.1:0\n")
        env = {"FERRY_E2E_SET": "from-env"}
        seen, log = self.serve(["-c", os.path.join(app, ".rr.yaml"), "--dotenv", ".env"], cwd="/", env=env)
        self.assertEqual(seen["greeting"], "hello from .env")  # in ${GREETING} of the config
        self.assertEqual(seen["set"], "from-env")  # the environment wins
        self.assertIn("config: .env: set GREETING, FERRY_E2E_ADDR", log)
        self.assertNotIn("hello from .env", log)  # names, not values
        # DOTENV_PATH, as RoadRunner reads it
        seen, _ = self.serve(["-w", app], cwd="/", env=dict(env, DOTENV_PATH=os.path.join(app, ".env")))
        self.assertEqual(seen["greeting"], "hello from .env")

    def test_a_bad_dotenv_file_is_a_clear_error(self):
        app = self.app("GREETING=hi\nnot a variable\n")
        p = run_ferry("serve", "-w", app, "--dotenv", ".env")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr, 'ferry: --dotenv: .env:2: expected NAME=value, got "not a variable"\n')
        p = run_ferry("serve", "-w", app, "--dotenv", "missing.env")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(p.stderr, "ferry: --dotenv: cannot read missing.env: No such file or directory\n")
        self.assertEqual(run_ferry("serve", "--dotenv").returncode, 2)


class Psr7Test(ServerTestCase):
    SCRIPT = "psr7_echo.php"
    CONFIG = {"http": {"pool": {"num_workers": 1}}}

    def test_psr7_echo(self):
        payload = b'{"k": "v", "n": 1}'
        status, headers, body = self.server.request(
            "POST", "/psr/path?a=1&b=x%20y", body=payload,
            headers={"Content-Type": "application/json", "X-Test": "t1", "Cookie": "c=d%20e"})
        self.assertEqual(status, 200, body)
        self.assertEqual([v for k, v in headers if k == "Set-Cookie"], ["a=1", "b=2"])
        d = json.loads(body)
        self.assertEqual(d["method"], "POST")
        self.assertEqual(d["uri"], f"http://127.0.0.1:{self.server.port}/psr/path?a=1&b=x%20y")
        self.assertEqual(d["protocolVersion"], "1.1")
        self.assertEqual(d["body"], payload.decode())
        self.assertEqual(d["query"], {"a": "1", "b": "x y"})
        self.assertEqual(d["cookies"], {"c": "d e"})
        self.assertEqual(d["headers"]["X-Test"], ["t1"])
        self.assertEqual(d["remoteAddr"], "127.0.0.1")
        self.assertEqual(d["requestUri"], "/psr/path?a=1&b=x%20y")

    def test_psr7_get(self):
        d = self.server.get_json("/")
        self.assertEqual((d["method"], d["body"]), ("GET", ""))
        self.assertEqual(d["uri"], f"http://127.0.0.1:{self.server.port}/")


if __name__ == "__main__":
    unittest.main()


class ExampleAppTest(unittest.TestCase):
    """The app `scripts/serve.sh` serves: examples/hello with its own .rr.yaml (address overridden)."""

    def test_example_app_serves_and_stops(self):
        from harness import ROOT
        proc = subprocess.Popen([BIN, "serve", "-w", os.path.join(ROOT, "examples", "hello"),
                                 "-o", f"http.address={HOST}:0"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        line, _ = read_listening_line(proc, 15)
        if line is None:  # its stderr is safe to read to the end only once it has exited
            self.fail(f"no listening line (exit code {proc.poll()}): "
                      f"{proc.stderr.read().decode() if proc.poll() is not None else ''}")
        port = int(line.rsplit(":", 1)[1])
        import http.client
        c = http.client.HTTPConnection(HOST, port, timeout=10)
        c.request("GET", "/?name=Ferry")
        r = c.getresponse()
        body = r.read().decode()
        self.assertEqual(r.status, 200)
        self.assertIn("Hello, Ferry!</h1>", body)
        # The page's stylesheet and logo come from public/ through the static handler.
        for path, ctype in (("/style.css", "text/css; charset=utf-8"), ("/logo.svg", "image/svg+xml")):
            self.assertIn(f'"{path}"', body)
            c.request("GET", path)
            r = c.getresponse()
            data = r.read()
            with open(os.path.join(ROOT, "examples", "hello", "public", path.lstrip("/")), "rb") as f:
                self.assertEqual((r.status, r.getheader("Content-Type"), data), (200, ctype, f.read()))
            self.assertEqual(r.getheader("Cache-Control"), "no-cache")
        c.request("POST", "/json?x=1", body=b"payload")
        r = c.getresponse()
        data = json.loads(r.read())
        self.assertEqual((data["method"], data["query"], data["body"]), ("POST", {"x": "1"}, "payload"))
        c.close()
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(15), 0)
        err = proc.stderr.read()
        self.assertIn(b"stopped", err)
        self.assertIn(b"reload: watching", err)
        self.assertIn(b"ready: new workers are forked from it", err)

    def test_example_app_reloads_an_edit_and_answers_the_cli(self):
        """The development loop the README promises: edit worker.php, save, refresh."""
        import shutil
        import tempfile
        from harness import ROOT, wait_until
        tmp = tempfile.mkdtemp(prefix="ferry-example-")
        self.addCleanup(shutil.rmtree, tmp, True)
        app = os.path.join(tmp, "hello")
        shutil.copytree(os.path.join(ROOT, "examples", "hello"), app)
        # The example's php-worker/ path is relative to the repository: point it there.
        worker = os.path.join(app, "worker.php")
        with open(worker) as f:
            code = f.read()
        code = code.replace("__DIR__ . '/../../php-worker", "'" + os.path.join(ROOT, "php-worker"))
        with open(worker, "w") as f:
            f.write(code)
        env = dict(os.environ, FERRY_RPC=f"unix://{tmp}/rpc.sock")
        proc = subprocess.Popen([BIN, "serve", "-w", app, "-o", f"http.address={HOST}:0"], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        line, _ = read_listening_line(proc, 15)
        if line is None:  # its stderr is safe to read to the end only once it has exited
            self.fail(f"no listening line (exit code {proc.poll()}): "
                      f"{proc.stderr.read().decode() if proc.poll() is not None else ''}")
        port = int(line.rsplit(":", 1)[1])

        def page():
            import http.client
            c = http.client.HTTPConnection(HOST, port, timeout=10)
            c.request("GET", "/?name=Ferry")
            body = c.getresponse().read().decode()
            c.close()
            return body

        self.assertIn("Hello, Ferry!</h1>", page())
        with open(worker, "w") as f:
            f.write(code.replace("Hello, ", "Howdy, "))
        self.assertTrue(wait_until(lambda: "Howdy, Ferry!</h1>" in page(), 10))
        def listed():
            r = subprocess.run([BIN, "workers", "-w", app], env=env, capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout

        # The first new worker answered; the reset ends once the old ones are gone: 2 workers again.
        self.assertTrue(wait_until(lambda: "2 worker(s)" in listed(), 10), listed())
        r = subprocess.run([BIN, "stop", "-w", app], env=env, capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(proc.wait(15), 0)
