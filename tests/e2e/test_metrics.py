"""metrics.address: Prometheus text at /metrics, read by the reference parser (Debian's python3-prometheus-client),
its counters matching what was sent: requests by status class, durations, queue, workers by state, RSS, jobs,
exits by cause, boot time."""

import concurrent.futures
import re
import socket
import sys
import unittest

from harness import HOST, Server, ServerTestCase, metrics_address, probe_get, wait_until

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # a Python of its own (pyenv) beside Debian's: the package is Debian's
    sys.path.append("/usr/lib/python3/dist-packages")
    from prometheus_client.parser import text_string_to_metric_families


def fetch(addr, target="/metrics", method="GET"):
    return probe_get(addr, target, method)


def scrape(srv):
    """{(name, frozenset(labels)): value} of every sample, parsed by prometheus_client (which raises on bad
    syntax), plus the families by name."""
    status, head, body = fetch(metrics_address(srv))
    assert status == 200, (status, body)
    assert "text/plain; version=0.0.4" in head, head
    families = {f.name: f for f in text_string_to_metric_families(body)}
    samples = {}
    for f in families.values():
        for s in f.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples, families


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


class Metrics(ServerTestCase):
    CONFIG = {"metrics": {"address": f"{HOST}:0"}, "http": {"pool": {"num_workers": 2}}}

    def test_counters_match_the_requests_sent(self):
        before, _ = scrape(self.server)
        for _ in range(30):
            self.assertEqual(self.server.request("GET", "/")[0], 200)
        for _ in range(4):
            self.assertEqual(self.server.request("GET", "/status/404")[0], 404)
        for _ in range(3):
            self.assertEqual(self.server.request("GET", "/status/503")[0], 503)
        self.assertEqual(self.server.request("GET", "/status/302")[0], 302)
        # refused by the parser: no PHP, still counted
        s = socket.create_connection((HOST, self.server.port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n")
        self.assertIn(b" 400 ", s.recv(4096))
        s.close()
        after, families = scrape(self.server)

        def delta(name, **labels):
            return value(after, name, **labels) - before.get((name, frozenset(labels.items())), 0)

        self.assertEqual(delta("ferry_http_requests_total", **{"class": "2xx"}), 30)
        self.assertEqual(delta("ferry_http_requests_total", **{"class": "3xx"}), 1)
        self.assertEqual(delta("ferry_http_requests_total", **{"class": "4xx"}), 5)
        self.assertEqual(delta("ferry_http_requests_total", **{"class": "5xx"}), 3)
        self.assertEqual(delta("ferry_http_request_duration_seconds_count"), 38)
        self.assertGreater(delta("ferry_http_request_duration_seconds_sum"), 0)
        self.assertEqual(families["ferry_http_request_duration_seconds"].type, "histogram")
        self.assertGreater(delta("ferry_http_response_bytes_total"), 38 * 40)
        self.assertEqual(delta("ferry_pool_jobs_total", pool="http"), 38)
        self.assertEqual(delta("ferry_pool_queue_wait_seconds_count", pool="http"), 38)
        self.assertEqual(value(after, "ferry_pool_queue_depth", pool="http"), 0)
        # the buckets are cumulative and end with +Inf = count
        buckets = sorted(((float(dict(k[1])["le"]), v) for k, v in after.items()
                          if k[0] == "ferry_http_request_duration_seconds_bucket"))
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets))
        self.assertEqual(buckets[-1], (float("inf"), value(after, "ferry_http_request_duration_seconds_count")))

    def test_workers_by_state_memory_jobs_and_boot_time(self):
        samples, _ = scrape(self.server)
        self.assertEqual(value(samples, "ferry_pool_workers", pool="http", state="ready"), 2)
        self.assertEqual(value(samples, "ferry_pool_workers", pool="http", state="working"), 0)
        pids = self.server.workers()
        for pid in pids:
            rss = value(samples, "ferry_pool_worker_memory_bytes", pool="http", pid=str(pid))
            self.assertGreater(rss, 4 << 20)  # a PHP process
            self.assertLess(rss, 512 << 20)
            self.assertIn(("ferry_pool_worker_jobs", frozenset({("pool", "http"), ("pid", str(pid))})), samples)
        self.assertEqual(value(samples, "ferry_pool_worker_boot_seconds_count", pool="http"),
                         value(samples, "ferry_pool_workers_spawned_total", pool="http"))
        self.assertGreater(value(samples, "ferry_pool_worker_boot_seconds_sum", pool="http"), 0)
        self.assertEqual(value(samples, "ferry_build_info", version=re.search(
            r'version="([^"]+)"', fetch(metrics_address(self.server))[2]).group(1)), 1)

    def test_a_busy_pool_shows_working_workers_and_its_queue(self):
        addr = metrics_address(self.server)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            slow = [ex.submit(self.server.request, "GET", "/sleep?ms=1500") for _ in range(4)]
            self.assertTrue(wait_until(
                lambda: value(scrape(self.server)[0], "ferry_pool_queue_depth", pool="http") == 2, 5.0))
            samples, _ = scrape(self.server)
            self.assertEqual(value(samples, "ferry_pool_workers", pool="http", state="working"), 2)
            for f in slow:
                self.assertEqual(f.result()[0], 200)
        samples, _ = scrape(self.server)
        self.assertEqual(value(samples, "ferry_pool_queue_depth", pool="http"), 0)
        # two of the four waited about 1.5 s for a worker
        self.assertGreaterEqual(samples[("ferry_pool_queue_wait_seconds_sum", frozenset({("pool", "http")}))], 2.5)
        le1 = value(samples, "ferry_pool_queue_wait_seconds_bucket", pool="http", le="1")
        total = value(samples, "ferry_pool_queue_wait_seconds_count", pool="http")
        self.assertGreaterEqual(total - le1, 2)
        self.assertEqual(fetch(addr, "/other")[0], 404)
        self.assertEqual(fetch(addr, method="POST")[0], 405)


class ExitCauses(unittest.TestCase):
    def test_exits_are_counted_by_cause(self):
        cfg = {"metrics": {"address": f"{HOST}:0"},
               "http": {"pool": {"num_workers": 1, "max_jobs": 3, "supervisor": {"exec_ttl": "500ms"}}}}
        with Server(cfg) as srv:
            for _ in range(8):  # max_jobs 3: recycled at least once
                self.assertEqual(srv.request("GET", "/")[0], 200)
            self.assertEqual(srv.request("GET", "/exit")[0], 502)  # crash
            self.assertEqual(srv.request("GET", "/sleep?ms=3000")[0], 504)  # exec_ttl
            def exits():
                s, _ = scrape(srv)
                return {c: value(s, "ferry_pool_worker_restarts_total", pool="http", cause=c)
                        for c in ("max_jobs", "crash", "exec_ttl", "memory")}
            self.assertTrue(wait_until(lambda: exits()["exec_ttl"] == 1 and exits()["crash"] == 1, 5.0), exits())
            e = exits()
            self.assertGreaterEqual(e["max_jobs"], 1)
            self.assertEqual(e["memory"], 0)

            def balanced():  # every worker started has either exited (for some cause) or is alive
                s, _ = scrape(srv)
                ended = sum(v for k, v in s.items() if k[0] == "ferry_pool_worker_restarts_total")
                self.assertNotIn(("ferry_pool_worker_restarts_total",
                                  frozenset({("pool", "http"), ("cause", "shutdown")})), s)
                alive = sum(v for k, v in s.items() if k[0] == "ferry_pool_workers")
                return ended + alive == value(s, "ferry_pool_workers_spawned_total", pool="http")
            self.assertTrue(wait_until(balanced, 5.0))


class WebSocketPool(unittest.TestCase):
    def test_the_websockets_pool_has_the_same_limits_and_its_own_metrics(self):
        from wsclient import RawWs, frame
        cfg = {"metrics": {"address": f"{HOST}:0"}, "http": {"pool": {"num_workers": 1}},
               "websockets": {"path": "/ws", "pool": {"num_workers": 2, "supervisor": {
                   "ttl": "1s", "watch_tick": "100ms"}}}}
        with Server(cfg, script="ws.php") as srv:
            c = RawWs(srv)
            self.assertTrue(c.handshake().startswith("HTTP/1.1 101 "))
            self.assertTrue(wait_until(lambda: value(scrape(srv)[0], "ferry_pool_worker_restarts_total",
                                                     pool="websockets", cause="ttl") >= 2, 6.0))
            samples, _ = scrape(srv)
            self.assertEqual(value(samples, "ferry_pool_worker_restarts_total", pool="http", cause="ttl"), 0)
            self.assertEqual(value(samples, "ferry_pool_workers", pool="websockets", state="ready"), 2)
            # the connection outlives the workers that opened it: a message is served by a new one
            c.send(frame(0x1, b"still here"))
            self.assertEqual(c.read_frame()[:2], (0x1, b"still here"))
            self.assertIn("lived its ttl (1000 ms): replacing it (ttl)", srv.stderr())
            c.close()


class MetricsAddressInUse(unittest.TestCase):
    def test_an_address_in_use_is_a_startup_error_naming_the_key(self):
        blocker = socket.socket()
        blocker.bind((HOST, 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        try:
            srv = Server({"metrics": {"address": f"{HOST}:{port}"}})
            try:
                with self.assertRaises(Exception):
                    srv.start(timeout=10)
                self.assertIn("metrics.address: cannot listen on", srv.stderr())
            finally:
                srv.close()
        finally:
            blocker.close()


if __name__ == "__main__":
    unittest.main()
