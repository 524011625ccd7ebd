"""HTTP/1.1 behaviour: echo, HEAD, HTTP/1.0, keep-alive, large and chunked bodies, 100-continue, pipelining."""

import email.utils
import hashlib
import json
import os
import re
import socket
import time
import unittest

from harness import E2E_PHP_DIR, Reader, ServerTestCase

MiB = 1 << 20


class EchoTest(ServerTestCase):
    CONFIG = {"http": {"pool": {"num_workers": 2}}}

    def test_get_echo(self):
        c = self.server.conn()
        c.request("GET", "/path/x?a=1&b=two%20words", headers={
            "x-custom-header": "v1",
            "Cookie": "name=hello%20world; other=a%2Bb",
        })
        r = c.getresponse()
        body = r.read()
        c.close()
        self.assertEqual(r.status, 200, body)
        self.assertEqual(r.getheader("Content-Type"), "application/json")
        d = json.loads(body)
        self.assertEqual(d["method"], "GET")
        self.assertEqual(d["uri"], f"http://127.0.0.1:{self.server.port}/path/x?a=1&b=two%20words")
        self.assertEqual(d["path"], "/path/x")
        self.assertEqual(d["rawQuery"], "a=1&b=two%20words")
        self.assertEqual(d["query"], {"a": "1", "b": "two words"})
        self.assertEqual(d["protocol"], "HTTP/1.1")
        self.assertEqual(d["remoteAddr"], "127.0.0.1")
        self.assertEqual(d["headers"]["X-Custom-Header"], ["v1"])
        self.assertEqual(d["headers"]["Accept-Encoding"], ["identity"])
        self.assertNotIn("Host", d["headers"])
        self.assertNotIn("host", d["headers"])
        self.assertEqual(d["cookies"], {"name": "hello world", "other": "a+b"})
        self.assertEqual(d["bodyLength"], 0)
        self.assertEqual(r.getheader("X-Worker-Pid"), str(d["pid"]))
        self.assertIn(d["pid"], self.server.workers())

    def test_no_stale_headers_or_cookies_on_a_reused_connection(self):
        # The server reuses its per-connection request context: nothing may leak into the next request.
        s = self.sock()
        s.sendall(b"GET /one HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-B: 2\r\nx-b: 3\r\nCookie: c=1\r\n\r\n"
                  b"GET /two HTTP/1.1\r\nHost: x\r\nX-C: only\r\n\r\n"
                  b"GET /three HTTP/1.1\r\nHost: x\r\nX-B: again\r\nX-D: 4\r\nX-E: 5\r\n\r\n")
        rd = Reader(s)
        one, two, three = (json.loads(rd.read_response().body) for _ in range(3))
        self.assertEqual(one["headers"], {"X-A": ["1"], "X-B": ["2", "3"], "Cookie": ["c=1"]})
        self.assertEqual(one["cookies"], {"c": "1"})
        self.assertEqual(two["headers"], {"X-C": ["only"]})
        self.assertEqual(two["cookies"], {})
        self.assertEqual(three["headers"], {"X-B": ["again"], "X-D": ["4"], "X-E": ["5"]})

    def test_header_names_canonical_and_repeated(self):
        s = self.sock()
        s.sendall(b"GET /h HTTP/1.1\r\nHost: example.test:81\r\nx-MULTI-word-NAME: one\r\n"
                  b"x-multi-word-name: two\r\ncontent-type: text/x-a\r\n\r\n")
        r = Reader(s).read_response()
        self.assertEqual(r.status, 200)
        d = json.loads(r.body)
        self.assertEqual(d["headers"]["X-Multi-Word-Name"], ["one", "two"])
        self.assertEqual(d["headers"]["Content-Type"], ["text/x-a"])
        self.assertEqual(d["uri"], "http://example.test:81/h")
        self.assertEqual(d["rawQuery"], "")
        self.assertNotIn("Host", d["headers"])

    def test_post_echo(self):
        payload = b"hello=world&x=%C3%A9"
        status, headers, body = self.server.request(
            "POST", "/submit?q=1", body=payload, headers={"Content-Type": "text/plain"})
        self.assertEqual(status, 200, body)
        d = json.loads(body)
        self.assertEqual(d["method"], "POST")
        self.assertEqual(d["uri"], f"http://127.0.0.1:{self.server.port}/submit?q=1")
        self.assertEqual(d["bodyLength"], len(payload))
        self.assertEqual(d["bodyMd5"], hashlib.md5(payload).hexdigest())
        self.assertEqual(d["headers"]["Content-Length"], [str(len(payload))])
        self.assertEqual(d["headers"]["Content-Type"], ["text/plain"])

    def test_head_keeps_the_apps_content_length(self):
        s = self.sock()
        s.sendall(b"HEAD /head-length HTTP/1.1\r\nHost: x\r\n\r\nGET /status/204 HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response(head_request=True)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("Content-Length"), "1234")
        self.assertEqual(r.body, b"")
        self.assertEqual(rd.read_response().status, 204, "the HEAD answer carried no body bytes")

    def test_head(self):
        s = self.sock()
        s.sendall(b"HEAD /big?n=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response(head_request=True)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("Content-Length"), "10")
        # No body bytes follow: the next response on the connection starts right away.
        s.sendall(b"GET /big?n=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        r2 = rd.read_response()
        self.assertEqual(r2.status, 200)
        self.assertEqual(r2.body, b"xxx")
        self.assertEqual(rd.buf, b"")

    def test_http10_closes(self):
        r, rd = self.raw(b"GET /ten?x=1 HTTP/1.0\r\n\r\n")
        self.assertEqual(r.status, 200)
        d = json.loads(r.body)
        self.assertEqual(d["protocol"], "HTTP/1.0")
        self.assertEqual(d["uri"], f"http://127.0.0.1:{self.server.port}/ten?x=1")
        self.assertIsNotNone(r.header("Content-Length"))
        self.assertNotEqual((r.header("Connection") or "").lower(), "keep-alive")
        self.assertTrue(rd.closed_by_peer(3), "HTTP/1.0 connection without keep-alive was not closed")
        rd.sock.close()

    def test_http10_keep_alive(self):
        s = self.sock()
        rd = Reader(s)
        s.sendall(b"GET /one HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = rd.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual((r.header("Connection") or "").lower(), "keep-alive")
        self.assertEqual(json.loads(r.body)["path"], "/one")
        s.sendall(b"GET /two HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = rd.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body)["path"], "/two")
        self.assertFalse(rd.closed_by_peer(0.3))

    def test_connection_close_honored(self):
        s = self.sock()
        s.sendall(b"GET /bye HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual((r.header("Connection") or "").lower(), "close")
        self.assertTrue(rd.closed_by_peer(3))

    def test_date_and_server_headers(self):
        r, _ = self.raw(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(r.header("Server"), "ferry")
        date = r.header("Date")
        self.assertRegex(date, r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                               r"\d{4} \d\d:\d\d:\d\d GMT$")
        self.assertLess(abs(email.utils.parsedate_to_datetime(date).timestamp() - time.time()), 60)
        self.assertEqual(len(r.header_all("Date")), 1)
        self.assertEqual(len(r.header_all("Server")), 1)

    def test_error_response_has_date_and_server(self):
        r, _ = self.raw(b"GET / HTTP/1.1\r\n\r\n")  # no Host: 400
        self.assertEqual(r.status, 400)
        self.assertEqual(r.header("Server"), "ferry")
        self.assertIsNotNone(r.header("Date"))

    def test_two_set_cookie_lines(self):
        r, _ = self.raw(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(r.header_all("Set-Cookie"), ["a=1", "b=2"])

    def test_status_passthrough(self):
        for code, has_body in ((201, True), (404, True), (418, True), (204, False), (304, False)):
            s = self.sock()
            s.sendall(f"GET /status/{code} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            rd = Reader(s)
            r = rd.read_response()
            self.assertEqual(r.status, code)
            if has_body:
                self.assertEqual(r.body, f"status {code}\n".encode())
            else:
                self.assertIsNone(r.header("Content-Length"))
                # nothing else may follow the head of a 204/304
                s.sendall(b"GET /big?n=2 HTTP/1.1\r\nHost: x\r\n\r\n")
                r2 = rd.read_response()
                self.assertEqual((r2.status, r2.body), (200, b"xx"))

    def test_absolute_form_target(self):
        r, _ = self.raw(b"GET http://other.test:99/p?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertEqual(r.status, 200)
        d = json.loads(r.body)
        self.assertEqual((d["uri"], d["path"], d["rawQuery"]), ("http://other.test:99/p?q=1", "/p", "q=1"))

    def test_duplicate_host_400(self):
        # RFC 9112 section 3.2: more than one Host header field line -> 400.
        r, rd = self.raw(b"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n")
        self.assertEqual(r.status, 400, r.body)

    def test_obs_fold_rejected(self):
        # RFC 9112 section 5.2 allows rejecting obs-fold with 400 or unfolding it: Ferry rejects it.
        r, rd = self.raw(b"GET / HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\nConnection: close\r\n\r\n")
        self.assertEqual(r.status, 400)
        self.assertIn(b"obsolete line folding", r.body)
        self.assertTrue(rd.closed_by_peer(3.0))

    def test_curl_get(self):
        p = self.server.curl("-i", "-b", "name=hello%20world", self.server.url("/curl?z=9"))
        self.assertEqual(p.returncode, 0, p.stderr)
        head, _, body = p.stdout.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 OK\r\n"), head)
        self.assertEqual(head.count(b"\r\nSet-Cookie: "), 2)
        d = json.loads(body)
        self.assertEqual(d["rawQuery"], "z=9")
        self.assertEqual(d["cookies"], {"name": "hello world"})
        self.assertEqual(d["headers"]["User-Agent"][0][:5], "curl/")

    def test_curl_reuses_connection(self):
        p = self.server.curl("-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null",
                             "-w", "%{http_code} %{num_connects}\n",
                             self.server.url("/a"), self.server.url("/b"), self.server.url("/c"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().split("\n"), ["200 1", "200 0", "200 0", ""])


class ResponseHeaderTest(ServerTestCase):
    """Headers a worker sends that the server must override or drop (tests/e2e/php/headers.php)."""
    SCRIPT = os.path.join(E2E_PHP_DIR, "headers.php")
    CONFIG = {"http": {"pool": {"num_workers": 1}}}

    def get(self, rd, path):
        rd.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return rd.read_response()

    def test_sanitised_headers(self):
        rd = Reader(self.sock())
        r = self.get(rd, "/cl")
        self.assertEqual((r.status, r.header_all("Content-Length"), r.body), (200, ["3"], b"abc"))
        r = self.get(rd, "/te")
        self.assertIsNone(r.header("Transfer-Encoding"))
        self.assertEqual((r.header("Content-Length"), r.body), ("10", b"plain body"))
        r = self.get(rd, "/crlf")
        self.assertIsNone(r.header("X-Evil"))
        self.assertIsNone(r.header("Injected"))
        self.assertEqual((r.header("X-Good"), r.body), ("fine", b"crlf"))
        r = self.get(rd, "/badname")
        self.assertEqual([k for k, _ in r.headers if k.lower().startswith("bad")], [])
        self.assertEqual((r.header("X-Good"), r.body), ("fine", b"badname"))
        self.assertTrue(self.server.wait_for_log("dropped 1 response header(s)"))
        r = self.get(rd, "/server")
        self.assertEqual(r.header_all("Server"), ["app/1.0"])
        self.assertEqual(r.header_all("Date"), ["Thu, 01 Jan 1970 00:00:00 GMT"])
        r = self.get(rd, "/204body")
        self.assertEqual((r.status, r.header("X-A"), r.header("Content-Length")), (204, "1", None))
        r = self.get(rd, "/empty")
        self.assertEqual((r.status, r.header("Content-Length"), r.body), (200, "0", b""))
        r = self.get(rd, "/cookies")
        self.assertEqual(r.header_all("Set-Cookie"), [f"c{i}={i}" for i in range(1, 51)])
        r = self.get(rd, "/conn")
        self.assertIsNone(r.header("Keep-Alive"))
        self.assertIsNone(r.header("Connection"))
        # after all of that the connection is still in sync and open
        r = self.get(rd, "/x")
        self.assertEqual((r.status, r.body), (200, b"ok"))
        self.assertEqual(rd.buf, b"")


class BodyTest(ServerTestCase):
    CONFIG = {"http": {"max_request_size": 4, "pool": {"num_workers": 2}}}

    def test_post_1mib_echo(self):
        payload = os.urandom(MiB)
        status, headers, body = self.server.request("POST", "/echo-body", body=payload,
                                                    headers={"Content-Type": "application/x-bin"})
        self.assertEqual(status, 200)
        self.assertEqual(dict(headers)["Content-Type"], "application/x-bin")
        self.assertEqual(len(body), MiB)
        self.assertTrue(body == payload, "1 MiB body came back different")

    def test_get_1mib(self):
        status, headers, body = self.server.request("GET", "/big?n=1048576")
        self.assertEqual(status, 200)
        self.assertEqual(dict(headers)["Content-Length"], str(MiB))
        self.assertEqual(body, b"x" * MiB)

    def test_curl_1mib_both_ways(self):
        payload = os.urandom(MiB)
        path = self.server.path("upload.bin")
        with open(path, "wb") as f:
            f.write(payload)
        p = self.server.curl("--data-binary", "@" + path, "-H", "Content-Type: application/octet-stream",
                             self.server.url("/echo-body"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout == payload, "curl upload came back different")
        p = self.server.curl(self.server.url("/big?n=1048576"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"x" * MiB)

    def test_chunked_request_body(self):
        s = self.sock()
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/x-test\r\n\r\n")
        parts = [b"hello", b" ", b"chunked world " * 100, bytes(range(256)), b"!"]
        for part in parts:
            s.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
            time.sleep(0.02)
        s.sendall(b"0\r\n\r\n")
        rd = Reader(s)
        r = rd.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("Content-Type"), "application/x-test")
        self.assertEqual(r.body, b"".join(parts))
        # the connection stays usable
        s.sendall(b"GET /big?n=4 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(rd.read_response().body, b"xxxx")

    def test_chunked_request_context(self):
        s = self.sock()
        s.sendall(b"POST /ctx HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n")
        r = Reader(s).read_response()
        self.assertEqual(r.status, 200)
        d = json.loads(r.body)
        self.assertEqual(d["bodyLength"], 7)
        self.assertEqual(d["bodyMd5"], hashlib.md5(b"abcdefg").hexdigest())

    def test_expect_100_continue(self):
        s = self.sock()
        body = b"continue-body"
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                  b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body))
        rd = Reader(s)
        interim = rd.read_response()
        self.assertEqual((interim.version, interim.status, interim.reason), ("HTTP/1.1", 100, "Continue"))
        self.assertEqual(rd.buf, b"")
        s.sendall(body)
        r = rd.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, body)


class PipelineTest(ServerTestCase):
    CONFIG = {"http": {"pool": {"num_workers": 2}}}

    def _pipeline(self, n):
        s = self.sock()
        reqs = []
        for i in range(n):
            if i % 3 == 2:
                reqs.append(f"GET /big?n={i} HTTP/1.1\r\nHost: x\r\n\r\n")
            else:
                reqs.append(f"GET /pipe/{i}?i={i} HTTP/1.1\r\nHost: x\r\n\r\n")
        s.sendall("".join(reqs).encode())
        rd = Reader(s)
        for i in range(n):
            r = rd.read_response()
            self.assertEqual(r.status, 200, f"response {i}")
            if i % 3 == 2:
                self.assertEqual(r.body, b"x" * i, f"response {i}")
            else:
                d = json.loads(r.body)
                self.assertEqual((d["path"], d["rawQuery"]), (f"/pipe/{i}", f"i={i}"), f"response {i}")
        self.assertEqual(rd.buf, b"")
        self.assertFalse(rd.closed_by_peer(0.2))

    def test_pipeline_10(self):
        self._pipeline(10)

    def test_pipeline_more_than_max_pipelined(self):
        self._pipeline(40)

    def test_pipeline_with_bodies_and_close(self):
        s = self.sock()
        s.sendall(b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                  b"POST /echo-body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n"
                  b"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                  b"GET /never HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        self.assertEqual(rd.read_response().body, b"abc")
        self.assertEqual(rd.read_response().body, b"de")
        r = rd.read_response()
        self.assertEqual(json.loads(r.body)["path"], "/last")
        self.assertEqual(r.header("Connection"), "close")
        self.assertEqual(rd.read_to_eof(), b"")  # /never is not answered

    def test_pipeline_survives_worker_crash(self):
        s = self.sock()
        s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /exit HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        self.assertEqual(json.loads(rd.read_response().body)["path"], "/a")
        self.assertEqual(rd.read_response().status, 502)
        r = rd.read_response()
        self.assertEqual((r.status, json.loads(r.body)["path"]), (200, "/c"))

    def test_keep_alive_reuse(self):
        c = self.server.conn()
        c.connect()
        sock = c.sock
        port = sock.getsockname()[1]
        pids = set()
        for i in range(6):
            c.request("GET", f"/ka/{i}")
            r = c.getresponse()
            d = json.loads(r.read())
            self.assertEqual(r.status, 200)
            self.assertEqual(d["path"], f"/ka/{i}")
            pids.add(d["pid"])
            self.assertIs(c.sock, sock, "http.client had to reconnect")
            self.assertEqual(c.sock.getsockname()[1], port)
        c.close()


if __name__ == "__main__":
    unittest.main()
