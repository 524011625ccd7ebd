"""HTTP/2 (issue 45, docs/http2.md): h2 over TLS by ALPN and h2c by prior knowledge (http.http2.h2c), with
real clients — curl (--http2, --http2-prior-knowledge), nghttp and h2load from nghttp2-client — reaching the
same handlers as HTTP/1.1: PHP with `protocol: HTTP/2.0`, bodies and uploads, static files and ranges, streamed
responses with 103 Early Hints, server-sent events, many streams at once on one connection. The limits and the
attacks (rapid reset, CONTINUATION and SETTINGS floods, an HPACK bomb, a window held at zero, too many streams,
an over-large body): test_http2_limits.py."""

import hashlib
import json
import os
import subprocess
import threading
import time
import unittest

from harness import HOST, php
from tlscase import TlsCase, pki


def tool(*args, timeout=30):
    return subprocess.run(list(args), capture_output=True, timeout=timeout)


class H2Case(TlsCase):
    """h2 on http.ssl.address, h2c on http.address; static files from the PKI's public/ directory."""
    SCRIPT = "stream.php"
    MORE_HTTP = {}

    @classmethod
    def setUpClass(cls):
        cls.SSL_HTTP = dict({"middleware": ["static"], "static": {"dir": pki().path("public")},
                             "http2": {"h2c": True}}, **cls.MORE_HTTP)
        super().setUpClass()

    def h2(self, *args, path="/"):  # curl over TLS with ALPN h2
        return self.curl("--http2", *args, path=path)

    def h2c(self, *args, path="/"):  # curl over plain TCP, HTTP/2 by prior knowledge
        return tool("curl", "-sS", "--max-time", "15", "--http2-prior-knowledge", *args, self.server.url(path))


class Requests(H2Case):
    SCRIPT = "echo.php"
    MORE_HTTP = {"max_request_size": 2}  # MB

    def test_php_sees_http2_over_tls_and_cleartext(self):
        for p, scheme, port in ((self.h2("-b", "a=1; b=2", path="/x?y=1"), "https", self.tls_port),
                                (self.h2c("-b", "a=1; b=2", path="/x?y=1"), "http", self.server.port)):
            self.assertEqual(p.returncode, 0, p.stderr)
            body = json.loads(p.stdout)
            self.assertEqual(body["protocol"], "HTTP/2.0")
            self.assertEqual(body["uri"], f"{scheme}://127.0.0.1:{port}/x?y=1")
            self.assertEqual(body["query"], {"y": "1"})
            self.assertEqual(body["cookies"], {"a": "1", "b": "2"})

    def test_upgrade_from_http11_to_h2c(self):
        url = self.server.url("/up?x=1")
        p = tool("curl", "-sS", "-v", "--max-time", "10", "--http2", url)
        err = p.stderr.decode()
        self.assertIn("< HTTP/1.1 101 Switching Protocols", err)
        self.assertIn("< HTTP/2 200", err)
        body = json.loads(p.stdout)
        self.assertEqual(body["protocol"], "HTTP/2.0")
        self.assertNotIn("Http2-Settings", body["headers"])
        self.assertNotIn("Upgrade", body["headers"])
        # A request with a body is answered in HTTP/1.1 (RFC 7540 §3.2 lets the server ignore the Upgrade).
        p = tool("curl", "-sS", "-v", "--max-time", "10", "--http2", "-d", "a=1", url)
        self.assertNotIn("101", p.stderr.decode())
        self.assertEqual(json.loads(p.stdout)["protocol"], "HTTP/1.1")

    def test_trailers_named_by_php_follow_the_body(self):
        import socket
        from h2peer import Peer
        want = hashlib.md5(b"trailed body").hexdigest()
        p = Peer().connect(HOST, self.server.port)
        self.addCleanup(p.close)
        status, headers, body, trailers, _ = p.response(p.request("GET", "/trailers"))
        self.assertEqual((status, body), (200, b"trailed body"))
        self.assertEqual(trailers, {"x-checksum": want})
        self.assertNotIn("x-checksum", headers)
        # HTTP/1.1: the chunked body's trailer section.
        s = socket.create_connection((HOST, self.server.port), timeout=5)
        self.addCleanup(s.close)
        s.sendall(b"GET /trailers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        self.assertIn(b"Transfer-Encoding: chunked", head)
        self.assertNotIn(b"\r\nX-Checksum:", head)
        self.assertEqual(rest, b"c\r\ntrailed body\r\n0\r\nX-Checksum: " + want.encode() + b"\r\n\r\n")

    def test_bodies_forms_and_uploads(self):
        data = os.urandom(1536 * 1024)  # past body_buffer_size? no: 1 MiB default spills it to a file
        path = pki().path("body.bin")
        with open(path, "wb") as f:
            f.write(data)
        p = self.h2("--data-binary", f"@{path}", "-H", "Content-Type: application/octet-stream", path="/up")
        body = json.loads(p.stdout)
        self.assertEqual(body["bodyMd5"], hashlib.md5(data).hexdigest())
        self.assertEqual(body["bodyLength"], len(data))
        p = self.h2c("-d", "a=1&b[]=2", path="/form")
        self.assertEqual(json.loads(p.stdout)["form"], {"a": "1", "b": ["2"]})
        p = self.h2("-F", f"file=@{pki().path('public/small.bin')}", "-F", "x=y", path="/multi")
        body = json.loads(p.stdout)
        self.assertEqual(body["form"], {"x": "y"})
        self.assertEqual(body["uploads"]["file"]["size"], 1024)

    def test_a_body_over_max_request_size_gets_413(self):
        path = pki().path("big-body.bin")
        with open(path, "wb") as f:
            f.write(b"x" * (3 * 1024 * 1024))
        p = self.h2("--data-binary", f"@{path}", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                    path="/up")
        self.assertEqual(p.stdout.decode(), "413 2")
        self.server.wait_for_log("the request body is larger than http.max_request_size")
        # The connection goes on serving: the next request is answered.
        self.assertEqual(json.loads(self.h2(path="/after").stdout)["path"], "/after")

    def test_static_files_ranges_and_head(self):
        for name in ("small.bin", "large.bin"):
            with open(pki().path(f"public/{name}"), "rb") as f:
                want = f.read()
            for p in (self.h2(path=f"/{name}"), self.h2c(path=f"/{name}")):
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stdout, want, name)
        p = self.h2("-r", "1000-1099", "-D", "-", path="/large.bin")
        head, body = p.stdout.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/2 206"), head)
        self.assertEqual(body, want[1000:1100])
        p = self.h2("-I", path="/large.bin")
        self.assertIn(b"content-length: 1048576", p.stdout)

    def test_nghttp_fetches_many_streams_on_one_connection(self):
        urls = [f"https://127.0.0.1:{self.tls_port}/n{i}" for i in range(40)]
        p = tool("nghttp", "-n", "-s", *urls)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.decode().count("/n"), 40, p.stdout)  # one stats line per stream

    def test_h2load_many_streams_all_answered(self):
        for url in (f"https://127.0.0.1:{self.tls_port}/load", self.server.url("/small.bin")):
            p = tool("h2load", "-n", "2000", "-c", "4", "-m", "32", url, timeout=60)
            out = p.stdout.decode()
            self.assertIn("2000 succeeded, 0 failed, 0 errored", out, out)
            self.assertIn("2000 2xx", out)


class Streaming(H2Case):
    def test_early_hints_then_a_streamed_body(self):
        p = self.h2("-v", path="/s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"one\ntwo\nthree\nfour\nfive\n")
        err = p.stderr.decode()
        self.assertIn("< HTTP/2 103", err)
        self.assertIn("< link: </style.css>; rel=preload; as=style", err)
        self.assertIn("< HTTP/2 200", err)
        self.assertIn("< x-streamed: yes", err)

    def test_a_long_stream_arrives_whole_while_other_streams_are_answered(self):
        results = {}

        def long():
            results["long"] = self.h2c(path="/stream-long")

        t = threading.Thread(target=long)
        t.start()
        time.sleep(0.2)
        p = tool("h2load", "-n", "200", "-c", "1", "-m", "8", self.server.url("/small.bin"), timeout=30)
        t.join(30)
        self.assertIn("200 succeeded", p.stdout.decode())
        body = results["long"].stdout
        self.assertEqual(len(body), 50 * 1024)
        self.assertEqual(body[:3], b"aaa")


class RedirectedCleartext(TlsCase):
    """With http.ssl.redirect, h2c on http.address gets the redirect as HTTP/1.1 does, not the app."""
    SSL = {"redirect": True}
    SSL_HTTP = {"http2": {"h2c": True}}

    def test_h2c_requests_are_redirected_to_https(self):
        p = tool("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version} %{redirect_url}",
                 "--max-time", "5", "--http2-prior-knowledge", self.server.url("/a?b=1"))
        self.assertEqual(p.stdout.decode(), f"308 2 https://127.0.0.1:{self.tls_port}/a?b=1")


class Cleartext(unittest.TestCase):
    """Without http.http2.h2c, HTTP/2's preface on http.address is a bad HTTP/1.1 request."""

    def test_prior_knowledge_refused_without_h2c(self):
        from harness import Server
        srv = Server({"http": {"address": f"{HOST}:0"}}).start()
        self.addCleanup(srv.close)
        p = tool("curl", "-sS", "--max-time", "5", "--http2-prior-knowledge", srv.url("/"))
        self.assertNotEqual(p.returncode, 0)
        p = tool("curl", "-sS", "--max-time", "5", srv.url("/plain"))
        self.assertEqual(json.loads(p.stdout)["protocol"], "HTTP/1.1")
        p = tool("curl", "-sS", "-v", "--max-time", "5", "--http2", srv.url("/upgrade"))  # Upgrade: h2c ignored
        self.assertNotIn("101", p.stderr.decode())
        self.assertEqual(json.loads(p.stdout)["protocol"], "HTTP/1.1")
        srv.stop()


if __name__ == "__main__":
    unittest.main()
