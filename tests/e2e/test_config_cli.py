"""The configuration as the binary reads it: errors that name the key and line, `ferry config` and its reference,
-o overrides, environment interpolation, the working directory and --dotenv."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import http_get, BIN, HOST, MARK_VAR, Reader, Server, php, read_listening_line, run_ferry


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

    def test_http_ssl_without_a_certificate_is_refused(self):
        # (unreadable files: test_tls.Errors)
        path = self.tmpfile("tls.yaml", f'version: "3"\nserver:\n  command: "{php("echo.php")}"\n'
                                        'http:\n  address: 127.0.0.1:0\n  ssl:\n    address: 127.0.0.1:0\n'
                                        '    key: a.key\n')
        p = run_ferry("serve", "-c", path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{path}:7:5: http.ssl.cert: missing (expected the TLS certificate", p.stderr)
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


if __name__ == "__main__":
    unittest.main()
