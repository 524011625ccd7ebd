"""Request limits, malformed requests and connection timeouts."""

import hashlib
import json
import os
import socket
import threading
import time
import unittest

from harness import Reader, ServerTestCase, http_get, metric, wait_until

MiB = 1 << 20


class LimitsTest(ServerTestCase):
    CONFIG = {"http": {
        "max_request_size": 1,  # MB
        "limits": {"max_header_size": "8KB"},
        "timeouts": {"read_header": "1s", "read_body": "1s", "idle": "1s"},
        "pool": {"num_workers": 2},
    }}

    def assert_closed(self, rd, timeout=3.0):
        self.assertTrue(rd.closed_by_peer(timeout), "the server did not close the connection")

    # -- header size ------------------------------------------------------------------------

    def test_header_too_large_431(self):
        r, rd = self.raw(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 10000 + b"\r\n\r\n")
        self.assertEqual(r.status, 431)
        self.assertEqual(r.reason, "Request Header Fields Too Large")
        self.assert_closed(rd)

    def test_header_under_limit_ok(self):
        value = "b" * 7000
        r, _ = self.raw(f"GET / HTTP/1.1\r\nHost: x\r\nX-Big: {value}\r\n\r\n".encode())
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body)["headers"]["X-Big"], [value])

    # -- body size --------------------------------------------------------------------------

    def test_content_length_over_limit_413_before_body(self):
        s = self.sock()
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MiB + 1))
        rd = Reader(s)
        r = rd.read_response()  # nothing of the body was sent
        self.assertEqual(r.status, 413)
        self.assertEqual(r.reason, "Content Too Large")
        self.assert_closed(rd)

    def test_content_length_over_limit_413_with_expect(self):
        s = self.sock()
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
                  % (5 * MiB))
        r = Reader(s).read_response()
        self.assertEqual(r.status, 413)  # not 100 Continue

    def test_body_exactly_at_limit_ok(self):
        payload = os.urandom(MiB)
        status, _, body = self.server.request("POST", "/echo-body", body=payload)
        self.assertEqual(status, 200)
        self.assertTrue(body == payload)

    def test_chunked_over_limit_413(self):
        s = self.sock()
        rd = Reader(s)
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"y" * 300000
        try:
            for _ in range(5):  # 1.5 MB in all
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before the whole body is sent
        r = rd.read_response()
        self.assertEqual(r.status, 413)
        self.assert_closed(rd)

    def test_chunked_under_limit_ok(self):
        s = self.sock()
        chunk = b"z" * 250000
        s.sendall(b"POST /ctx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(4):
            s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        r = Reader(s).read_response()
        self.assertEqual(r.status, 200)
        d = json.loads(r.body)
        self.assertEqual(d["bodyLength"], 1000000)
        self.assertEqual(d["bodyMd5"], hashlib.md5(chunk * 4).hexdigest())

    # -- malformed requests -----------------------------------------------------------------

    def test_malformed_request_line_400(self):
        r, rd = self.raw(b"THIS IS NOT HTTP\r\n\r\n")
        self.assertEqual(r.status, 400)
        self.assert_closed(rd)

    def test_garbage_version_400(self):
        r, rd = self.raw(b"GET / HTTP/9.x\r\nHost: x\r\n\r\n")
        self.assertEqual(r.status, 400)
        self.assert_closed(rd)

    def test_content_length_and_transfer_encoding_400(self):
        r, rd = self.raw(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        self.assertEqual(r.status, 400)
        self.assert_closed(rd)

    def test_two_different_content_lengths_400(self):
        r, rd = self.raw(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                         b"Content-Length: 6\r\n\r\nhello!")
        self.assertEqual(r.status, 400)
        self.assert_closed(rd)

    def test_missing_host_400(self):
        r, rd = self.raw(b"GET / HTTP/1.1\r\nUser-Agent: t\r\n\r\n")
        self.assertEqual(r.status, 400)
        self.assert_closed(rd)

    def test_error_after_good_request_in_pipeline(self):
        s = self.sock()
        s.sendall(b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nBAD REQUEST LINE\r\n\r\n")
        rd = Reader(s)
        r1 = rd.read_response()
        self.assertEqual(r1.status, 200)
        self.assertEqual(json.loads(r1.body)["path"], "/first")
        r2 = rd.read_response()
        self.assertEqual(r2.status, 400)
        self.assert_closed(rd)

    # -- timeouts ---------------------------------------------------------------------------

    def test_idle_keep_alive_closed(self):
        s = self.sock()
        rd = Reader(s)
        s.sendall(b"GET /idle HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(rd.read_response().status, 200)
        t0 = time.monotonic()
        self.assertTrue(rd.closed_by_peer(4.0), "idle keep-alive connection was not closed")
        elapsed = time.monotonic() - t0
        self.assertGreater(elapsed, 0.7)
        self.assertLess(elapsed, 2.5)
        self.assertEqual(rd.buf, b"")  # closed silently, no 408

    def test_idle_before_first_request_closed(self):
        s = self.sock()
        rd = Reader(s)
        t0 = time.monotonic()
        self.assertTrue(rd.closed_by_peer(4.0))
        self.assertLess(time.monotonic() - t0, 2.5)

    def test_slow_header_408(self):
        s = self.sock()
        s.sendall(b"GET /slow HTTP/1.1\r\nHo")
        t0 = time.monotonic()
        rd = Reader(s)
        r = rd.read_response()
        elapsed = time.monotonic() - t0
        self.assertEqual(r.status, 408)
        self.assertGreater(elapsed, 0.7)
        self.assertLess(elapsed, 2.5)
        self.assert_closed(rd)

    def test_slow_header_trickle_408(self):
        # Bytes keep coming, but the header as a whole takes longer than read_header.
        s = self.sock()
        t0 = time.monotonic()
        s.sendall(b"GET /trickle HTTP/1.1\r\n")
        try:
            for i in range(12):
                time.sleep(0.25)
                s.sendall(b"X-H%d: v\r\n" % i)
        except (BrokenPipeError, ConnectionResetError):
            pass
        rd = Reader(s)
        r = rd.read_response()
        self.assertEqual(r.status, 408)
        self.assertLess(time.monotonic() - t0, 3.5)

    def test_slow_worker_not_cut_by_client_timeouts(self):
        # read_header / idle (1 s) do not apply while the worker is busy with the request
        s = self.sock()
        s.sendall(b"GET /sleep?ms=2500 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s).read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body)["path"], "/sleep")

    def test_slow_body_408(self):
        s = self.sock()
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello")
        t0 = time.monotonic()
        rd = Reader(s)
        r = rd.read_response()
        self.assertEqual(r.status, 408)
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assert_closed(rd)


class WriteTimeoutTest(ServerTestCase):
    CONFIG = {"http": {"timeouts": {"write": "1s"}, "pool": {"num_workers": 1, "allocate_timeout": "5s"}}}

    def test_client_not_reading_is_dropped(self):
        total = 30_000_000
        s = self.sock()
        s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % total)
        # Read nothing: the kernel buffers fill, the server's write stalls, and 1 s later it gives up (logged).
        self.assertTrue(self.server.wait_for_log("(http.timeouts.write)", 10), "the write timeout is logged")
        # the worker is not held by the stalled client
        t0 = time.monotonic()
        self.assertEqual(self.server.request("GET", "/other")[0], 200)
        self.assertLess(time.monotonic() - t0, 1.0)
        rd = Reader(s)
        got = 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        else:
            self.fail("the connection was not closed")
        self.assertLess(got, total)

    def test_slow_but_progressing_download_is_not_cut(self):
        # Issue 5 item 10: the write timeout (1 s here) is on lack of progress, not on the whole response.
        total = 10_000_000
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sockets.append(s)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.settimeout(10)
        s.connect(("127.0.0.1", self.server.port))
        s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % total)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(1)
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        got = 0
        t0 = time.monotonic()
        while got < total:  # ~3 MB/s: a few seconds for the whole body, progress every 50 ms
            chunk = s.recv(min(150_000, total - got))
            if not chunk:
                break
            got += len(chunk)
            time.sleep(0.05)
        self.assertEqual(got, total, "the download was cut")
        self.assertGreater(time.monotonic() - t0, 1.5, "the test did not outlast the write timeout")

    def test_client_gone_mid_request_frees_worker(self):
        s = self.sock()
        s.sendall(b"GET /sleep?ms=500 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.1)
        s.close()
        t0 = time.monotonic()
        status, _, body = self.server.request("GET", "/after")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["path"], "/after")
        self.assertLess(time.monotonic() - t0, 1.5)


class ClientGoneTest(ServerTestCase):
    """Issue 5 item 9: requests whose client reset its connection while they waited are not executed."""
    SCRIPT = "reqlog.php"
    CONFIG = {"http": {"pool": {"num_workers": 1, "allocate_timeout": "20s"}}}

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.reqlog = tempfile.NamedTemporaryFile(prefix="ferry-e2e-reqlog-", delete=False).name
        cls.ENV = {"FERRY_TEST_REQLOG": cls.reqlog}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        os.unlink(cls.reqlog)

    def logged(self):
        with open(self.reqlog) as f:
            return f.read().split("\n")[:-1]

    def test_reset_while_queued_is_dropped_half_close_is_answered(self):
        import struct
        results = {}
        busy = threading.Thread(target=http_get, args=(self.server, "/hold?sleep_ms=1000", results, "busy"))
        busy.start()
        time.sleep(0.2)
        # 30 clients send a request and reset their connection while it waits for the one busy worker.
        for i in range(30):
            s = self.server.socket()
            s.sendall(b"GET /gone%d?sleep_ms=100 HTTP/1.1\r\nHost: x\r\n\r\n" % i)
            time.sleep(0.005)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        # One that only half-closes still gets its answer.
        half = self.sock()
        half.sendall(b"GET /half-closed HTTP/1.1\r\nHost: x\r\n\r\n")
        half.shutdown(socket.SHUT_WR)
        t0 = time.monotonic()
        status, _, _ = self.server.request("GET", "/real")
        waited = time.monotonic() - t0
        self.assertEqual(status, 200)
        self.assertLess(waited, 2.5, "the dropped requests were executed first (30 x 100 ms)")
        r = Reader(half).read_response()
        self.assertEqual(r.status, 200)
        busy.join(5)
        paths = [line.split(" ")[1] for line in self.logged()]
        self.assertNotIn("/gone0", paths)
        self.assertEqual([p for p in paths if p.startswith("/gone")], [])
        self.assertIn("/half-closed", paths)
        self.assertIn("/real", paths)


if __name__ == "__main__":
    unittest.main()


class HeadMemoryTest(ServerTestCase):
    """Issue 41: receive buffers past each connection's first 8 KiB (large heads) share
    http.limits.max_head_memory: 40 clients that each send 60 KiB of a head and stall hold at most the budget;
    the ones past it get 503, and a small request of another client is answered at once."""

    CONFIG = {"http": {"limits": {"max_head_memory": "1MB"}, "timeouts": {"read_header": "10s"},
                       "pool": {"num_workers": 1}},
              "metrics": {"address": "127.0.0.1:0"}}

    def test_unfinished_large_heads_share_the_budget(self):
        socks = []
        for _ in range(40):
            s = self.sock(timeout=10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"h" * 60000)
            socks.append(s)
        time.sleep(0.5)
        refused = 0
        for s in socks:
            s.settimeout(0.05)
            try:
                data = s.recv(4096)
            except socket.timeout:
                continue
            if data.startswith(b"HTTP/1.1 503"):
                refused += 1
        # A 60 KiB head grows its buffer to 64 KiB (56 KiB past the first 8): at most 18 fit in 1 MiB.
        self.assertGreaterEqual(refused, 40 - 18, self.server.stderr()[-2000:])
        self.assertLess(refused, 40, "some heads fit in the budget")
        self.assertLessEqual(metric(self.server, "ferry_head_memory_bytes"), 1 << 20)
        self.assertEqual(metric(self.server, "ferry_limit_refusals_total", limit="head_memory"), refused)
        self.assertTrue(self.server.wait_for_log("http.limits.max_head_memory"))
        t0 = time.monotonic()
        r, _ = self.raw(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(r.status, 200)
        self.assertLess(time.monotonic() - t0, 2.0)
        for s in socks:
            s.close()
        self.assertTrue(wait_until(lambda: metric(self.server, "ferry_head_memory_bytes") == 0, 5))
