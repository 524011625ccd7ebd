"""status.address (RoadRunner's status plugin): /health and /ready, bare and with ?plugin=, flipping when every
worker is busy and during a stop; unavailable_status_code; bad requests; one listener shared with /metrics when
both are on one address."""

import re
import socket
import threading
import time
import unittest

from harness import HOST, ServerTestCase, probe_get, wait_until


def status_address(srv):
    m = re.search(r"status: health checks on http://(\S+)/health", srv.stderr())
    assert m, srv.stderr()
    host, port = m.group(1).rsplit(":", 1)
    return host, int(port)


def get(addr, target, method="GET", raw=None):
    """(status, body) of one request on a fresh connection."""
    status, _, body = probe_get(addr, target, method, raw)
    return status, body


def held_port(test):
    """A port another socket listens on for the rest of `test`."""
    blocker = socket.socket()
    blocker.bind((HOST, 0))
    blocker.listen()
    test.addCleanup(blocker.close)
    return blocker.getsockname()[1]


class Status(ServerTestCase):
    CONFIG = {"status": {"address": f"{HOST}:0"}}

    def test_health_and_ready(self):
        addr = status_address(self.server)
        for target in ("/health", "/health?plugin=http", "/ready", "/ready?plugin=http"):
            status, body = get(addr, target)
            self.assertEqual(status, 200, target)
            self.assertTrue(body.startswith("http: "), body)
        self.assertEqual(get(addr, "/ready")[1], "http: 2 of 2 worker(s) ready\n")
        self.assertEqual(get(addr, "/health")[1], "http: 2 live worker(s)\n")
        self.assertEqual(get(addr, "/health", method="HEAD")[0], 200)

    def test_bad_requests(self):
        addr = status_address(self.server)
        status, body = get(addr, "/health?plugin=grpc")
        self.assertEqual(status, 404)
        self.assertIn('no plugin "grpc" (Ferry has: http)', body)
        self.assertEqual(get(addr, "/metrics")[0], 404)
        self.assertEqual(get(addr, "/health", method="POST")[0], 405)
        self.assertEqual(get(addr, None, raw=b"GARBAGE\r\n\r\n")[0], 400)
        # a probe that never finishes its request is dropped (5 s: the HTTP session's 408, then the close), the
        # listener keeps answering
        s = socket.create_connection(addr, timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\n")
        self.assertEqual(get(addr, "/health")[0], 200)
        s.settimeout(8)
        t0, got = time.monotonic(), b""
        while chunk := s.recv(4096):
            got += chunk
        self.assertTrue(got.startswith(b"HTTP/1.1 408 "), got)
        self.assertLess(time.monotonic() - t0, 7.0)
        s.close()


class Flips(ServerTestCase):
    CONFIG = {"status": {"address": f"{HOST}:0", "unavailable_status_code": 509}}

    def test_ready_says_no_while_every_worker_is_busy(self):
        addr = status_address(self.server)
        threads = [threading.Thread(target=self.server.request, args=("GET", "/sleep?ms=1500")) for _ in range(2)]
        for t in threads:
            t.start()
        self.assertTrue(wait_until(lambda: get(addr, "/ready")[0] == 509, 5))
        status, body = get(addr, "/ready")
        self.assertEqual((status, body), (509, "http: 0 of 2 worker(s) ready\n"))
        self.assertEqual(get(addr, "/health")[0], 200, "busy workers are alive")
        for t in threads:
            t.join()
        self.assertTrue(wait_until(lambda: get(addr, "/ready")[0] == 200, 5))

    def test_ready_says_no_during_a_stop(self):
        srv = self.start_server({"status": {"address": f"{HOST}:0"}})
        addr = status_address(srv)
        t = threading.Thread(target=srv.request, args=("GET", "/sleep?ms=2000"))
        t.start()
        time.sleep(0.3)
        srv.terminate()
        self.assertTrue(wait_until(lambda: get(addr, "/ready")[0] == 503, 3))
        self.assertEqual(get(addr, "/ready")[1], "http: the server is stopping\n")
        self.assertEqual(get(addr, "/health")[0], 200, "the workers still live while the request finishes")
        t.join()
        srv.stop()

    def test_address_in_use_is_a_startup_error(self):
        port = held_port(self)
        from harness import Server
        srv = Server({"status": {"address": f"{HOST}:{port}"}})
        self.addCleanup(srv.close)
        with self.assertRaises(AssertionError):
            srv.start(timeout=5)
        self.assertIn(f"status.address: cannot listen on {HOST}:{port}: Address already in use", srv.stderr())
        self.assertNotIn("boost", srv.stderr())


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class SharedWithMetrics(unittest.TestCase):
    """status.address = metrics.address: one listener answers /health, /ready and /metrics, routed by path."""

    def test_one_listener_answers_both(self):
        from harness import Server
        port = free_port()
        srv = Server({"status": {"address": f"{HOST}:{port}"}, "metrics": {"address": f"{HOST}:{port}"}})
        self.addCleanup(srv.close)
        srv.start()
        addr = status_address(srv)
        self.assertEqual(addr, (HOST, port))
        self.assertIn(f"Prometheus metrics on http://{HOST}:{port}/metrics", srv.stderr())
        self.assertEqual(get(addr, "/health"), (200, "http: 2 live worker(s)\n"))
        self.assertEqual(get(addr, "/ready")[0], 200)
        status, body = get(addr, "/metrics")
        self.assertEqual(status, 200)
        self.assertIn("ferry_pool_workers", body)
        status, body = get(addr, "/other")
        self.assertEqual(status, 404)
        self.assertIn("this listener answers /health, /ready, /metrics", body)
        self.assertEqual(get(addr, "/metrics", method="POST")[0], 405)
        self.assertEqual(get(addr, "/ready", method="POST")[0], 405)

    def test_differing_first_byte_timeouts_say_which_applies(self):
        from harness import Server
        port = free_port()
        srv = Server({"status": {"address": f"{HOST}:{port}", "first_byte_timeout": "1s"},
                      "metrics": {"address": f"{HOST}:{port}", "first_byte_timeout": "3s"}})
        self.addCleanup(srv.close)
        srv.start()
        self.assertIn("status.first_byte_timeout (1000 ms) and metrics.first_byte_timeout (3000 ms) differ, but "
                      "status.address = metrics.address is one listener: 3000 ms applies to both", srv.stderr())
        # the longer one: a silent connection is still open after 1.5 s, closed by 3 s (and a bit)
        s = socket.create_connection((HOST, port), timeout=10)
        self.addCleanup(s.close)
        s.settimeout(1.5)
        with self.assertRaises(socket.timeout):
            s.recv(1)
        s.settimeout(5)
        self.assertEqual(s.recv(1), b"")

    def test_the_shared_address_in_use_names_both_keys(self):
        port = held_port(self)
        from harness import Server
        srv = Server({"status": {"address": f"{HOST}:{port}"}, "metrics": {"address": f"{HOST}:{port}"}})
        self.addCleanup(srv.close)
        with self.assertRaises(AssertionError):
            srv.start(timeout=5)
        self.assertIn(f"status.address (= metrics.address): cannot listen on {HOST}:{port}: Address already in use",
                      srv.stderr())


class RpcOnTheAdminListener(unittest.TestCase):
    """rpc.listen on status.address (or metrics.address): one admin port. The listener hands RPC the
    connections that open with a Goridge frame; HTTP probes, the CLI and a worker's Rpc client all use it."""

    def start_server(self, config, script="ws.php"):
        from harness import Server
        srv = Server(config, script=script)
        self.addCleanup(srv.close)
        self.addCleanup(srv.kill)
        return srv.start()

    def test_status_metrics_and_rpc_on_one_port(self):
        import subprocess
        from harness import BIN
        from clients import Rpc
        port = free_port()
        srv = self.start_server({"status": {"address": f"{HOST}:{port}"}, "metrics": {"address": f"{HOST}:{port}"},
                                 "rpc": {"listen": f"tcp://{HOST}:{port}"},
                                 "websockets": {"path": "/ws", "pool": {"num_workers": 1}}})
        self.assertIn(f"rpc: listening on tcp://{HOST}:{port} (through status.address)", srv.stderr())
        addr = (HOST, port)
        self.assertEqual(get(addr, "/health")[0], 200)
        self.assertIn("ferry_pool_workers", get(addr, "/metrics")[1])
        c = Rpc(f"tcp://{HOST}:{port}")
        self.addCleanup(c.close)
        self.assertEqual(c.call("informer.List", True), (True, ["http", "websockets"]))
        self.assertEqual(c.call("informer.List", True), (True, ["http", "websockets"]))  # the same connection
        r = subprocess.run([BIN, "workers", "-c", srv.config_path], capture_output=True, text=True, timeout=20,
                           cwd=srv.tmp.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("PID", r.stdout.upper(), r.stdout)
        # a worker's own Rpc client (RR_RPC) publishes through it
        from wsclient import RawWs
        ws = RawWs(srv, "/ws?topics=news")
        self.addCleanup(ws.close)
        self.assertIn(" 101 ", ws.handshake())
        self.assertEqual(srv.request("GET", "/publish?topic=news&msg=one-port")[::2], (200, b"published\n"))
        self.assertEqual(ws.read_frame()[:2], (1, b"one-port"))
        # HTTP that is not a probe path is still the status listener's 404, not RPC's
        self.assertEqual(get(addr, "/rpc")[0], 404)
        self.assertNotIn("not an RPC frame", srv.stderr())
        srv.stop()

    def test_a_silent_or_half_connection_is_the_listeners_to_close(self):
        port = free_port()
        srv = self.start_server({"status": {"address": f"{HOST}:{port}", "first_byte_timeout": "300ms"},
                                 "rpc": {"listen": f"tcp://{HOST}:{port}"}})
        silent = socket.create_connection((HOST, port), timeout=5)
        self.addCleanup(silent.close)
        t0 = time.monotonic()
        self.assertEqual(silent.recv(10), b"")  # no first byte: closed by the status listener's timeout
        self.assertLess(time.monotonic() - t0, 3.0)
        self.assertTrue(wait_until(lambda: "no byte within status.first_byte_timeout" in srv.stderr(), 3.0),
                        srv.stderr())
        # a Goridge frame's first bytes, then garbage: RPC's own error, the listener keeps serving
        bad = socket.create_connection((HOST, port), timeout=5)
        self.addCleanup(bad.close)
        bad.sendall(b"\x13" + b"\xff" * 11)
        bad.settimeout(5)
        self.assertEqual(bad.recv(10), b"")
        self.assertTrue(wait_until(lambda: "not an RPC frame" in srv.stderr(), 3.0), srv.stderr())
        self.assertEqual(get((HOST, port), "/health")[0], 200)
        srv.stop()

    def test_rpc_on_metrics_address_and_the_loopback_rule_still_holds(self):
        from harness import Server
        from clients import Rpc
        port = free_port()
        srv = self.start_server({"status": {"address": f"{HOST}:0"}, "metrics": {"address": f"{HOST}:{port}"},
                                 "rpc": {"listen": f"tcp://{HOST}:{port}"}})
        self.assertIn("(through metrics.address)", srv.stderr())
        c = Rpc(f"tcp://{HOST}:{port}")
        self.addCleanup(c.close)
        self.assertEqual(c.call("informer.List", True)[0], True)
        self.assertIn("ferry_pool_workers", get((HOST, port), "/metrics")[1])
        srv.stop()
        # on every interface, riding status: still refused without rpc.allow_remote, naming the key
        port = free_port()
        bad = Server({"status": {"address": f"0.0.0.0:{port}"}, "rpc": {"listen": f"tcp://0.0.0.0:{port}"}})
        self.addCleanup(bad.close)
        with self.assertRaises(AssertionError):
            bad.start(timeout=5)
        self.assertIn("rpc.listen: \"tcp://0.0.0.0:%d\" is not a loopback address" % port, bad.stderr())


class WithWebsockets(ServerTestCase):
    SCRIPT = "ws.php"
    CONFIG = {"status": {"address": f"{HOST}:0"}, "websockets": {"path": "/ws", "pool": {"num_workers": 1}}}

    def test_both_pools(self):
        addr = status_address(self.server)
        self.assertEqual(get(addr, "/ready"), (200, "http: 2 of 2 worker(s) ready\nwebsockets: 1 of 1 worker(s) ready\n"))
        self.assertEqual(get(addr, "/health?plugin=websockets"), (200, "websockets: 1 live worker(s)\n"))
        self.assertEqual(get(addr, "/health?plugin=http,websockets")[0], 200)
        self.assertIn("Ferry has: http, websockets", get(addr, "/health?plugin=jobs")[1])


if __name__ == "__main__":
    unittest.main()


class QueueLimit(ServerTestCase):
    CONFIG = {"http": {"pool": {"num_workers": 1, "max_queue_size": 2}}}

    def test_a_full_queue_answers_503_at_once(self):
        results = {}

        def fetch(key, path):
            t0 = time.monotonic()
            status, headers, body = self.server.request("GET", path, timeout=20)
            results[key] = (status, dict(headers), time.monotonic() - t0)

        busy = threading.Thread(target=fetch, args=("busy", "/sleep?ms=1500"))
        busy.start()
        time.sleep(0.3)
        queued = [threading.Thread(target=fetch, args=(f"q{i}", "/")) for i in range(2)]
        for t in queued:
            t.start()
        time.sleep(0.3)
        fetch("over", "/")
        status, headers, took = results["over"]
        self.assertEqual(status, 503)
        self.assertEqual(headers.get("Retry-After"), "1")
        self.assertLess(took, 0.5, "answered at once, not after allocate_timeout")
        for t in [busy] + queued:
            t.join()
        self.assertEqual([results[k][0] for k in ("busy", "q0", "q1")], [200, 200, 200], "the queued ones are served")
        self.assertEqual(self.server.request("GET", "/")[0], 200)
        self.assertTrue(self.server.wait_for_log("the queue is full (max_queue_size 2"))
