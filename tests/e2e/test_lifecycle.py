"""Process lifecycle: graceful SIGTERM with requests in flight, SIGKILL, the PSR-7 bridge, the bundled example
app. The configuration as the binary reads it is test_config_cli.py."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from harness import (assert_clean_stop, http_get, BIN, HOST, Reader, Server, ServerTestCase, pids_with_marker,
                     read_listening_line, wait_until)


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
        self.assertLess(time.monotonic() - t0, 2.0, srv.stderr())
        self.assertEqual(code, 1, srv.stderr())
        self.assertIn("second signal: stopping now", srv.stderr())
        self.assertIn("second signal, killing it", srv.stderr())
        self.assertNotIn("AddressSanitizer", srv.stderr())
        assert_clean_stop(srv.stderr())
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
