"""http.ssl (issue 45): HTTPS on its own address with certificates the test makes with `openssl` (tlscase.py) —
real curl and Python's ssl as clients; TLS 1.2 and 1.3 only; keep-alive, pipelining, large bodies and static
files over TLS; WebSockets over TLS (wss); the 308 redirect from plain HTTP; client certificates as
client_auth_type says, their subject given to PHP; session resumption; the handshake's limits (a timeout, a
cap on handshakes in progress, garbage or plain HTTP instead of a ClientHello, a record that never completes)
and stalled clients after it — each closed and logged, none costing a PHP request. Reloads, config errors and
the browser: test_tls_ops.py."""


import json
import os
import socket
import ssl
import subprocess
import time
import unittest

from harness import HOST, metric, wait_until
from tlscase import TlsCase, pki
from wsclient import RawWs, frame


class Https(TlsCase):
    SSL = {"handshake_timeout": "1s"}
    EXTRA = {"metrics": {"address": f"{HOST}:0"}}

    @classmethod
    def setUpClass(cls):
        cls.SSL_HTTP = {"middleware": ["static"], "static": {"dir": pki().path("public")}}
        super().setUpClass()

    def test_static_files_small_large_and_ranges(self):
        for name in ("small.bin", "large.bin"):
            with open(pki().path(f"public/{name}"), "rb") as f:
                want = f.read()
            p = self.curl(path=f"/{name}")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, want, name)
        p = self.curl("-r", "1000-1099", path="/large.bin")
        self.assertEqual(p.stdout, want[1000:1100])

    def test_curl_gets_an_https_context_over_tls13_with_alpn(self):
        p = self.curl("-v", path="/hello?x=1")
        self.assertEqual(p.returncode, 0, p.stderr)
        body = json.loads(p.stdout)
        self.assertEqual(body["uri"], f"https://127.0.0.1:{self.tls_port}/hello?x=1")
        self.assertEqual(body["attributes"], {}, "no client certificate: no attribute")
        err = p.stderr.decode()
        self.assertIn("TLSv1.3", err)
        self.assertIn("ALPN: server accepted h2", err, "h2 first: a client offering both gets HTTP/2")
        self.assertEqual(body["protocol"], "HTTP/2.0")
        p = self.curl("-v", "--http1.1", path="/hello")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ALPN: server accepted http/1.1", p.stderr.decode())
        self.assertEqual(json.loads(p.stdout)["protocol"], "HTTP/1.1")

    def test_tls12_works_and_older_versions_are_refused(self):
        p = self.curl("--tls-max", "1.2", path="/")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = self.tls(pki().client_context(maximum_version=ssl.TLSVersion.TLSv1_2))
        self.assertEqual(s.version(), "TLSv1.2")
        self.assertIn(s.cipher()[0], ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                                      "ECDHE-ECDSA-CHACHA20-POLY1305"))
        old = pki().client_context(maximum_version=ssl.TLSVersion.TLSv1_1)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.set_ciphers("ALL:@SECLEVEL=0")
        with self.assertRaises((ssl.SSLError, ConnectionResetError)):
            self.tls(old)

    def test_keep_alive_pipelining_and_large_bodies(self):
        s = self.tls()
        body = os.urandom(3 << 20)
        req = (f"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        # Three requests in one write: a 3 MiB upload between two GETs, answered in order on one connection.
        s.sendall(b"GET /big?n=5 HTTP/1.1\r\nHost: x\r\n\r\n" + req + b"GET /big?n=2000000 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(self.read_response(s)[2], b"xxxxx")
        status, _, echoed = self.read_response(s)
        self.assertIn(" 200 ", status)
        self.assertEqual(echoed, body)
        self.assertEqual(self.read_response(s)[2], b"x" * 2000000)

    def test_sessions_resume(self):
        ctx = pki().client_context()
        s = self.tls(ctx)
        s.sendall(b"GET /big?n=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.read_response(s)  # TLS 1.3 tickets come after the handshake
        session = s.session
        self.assertIsNotNone(session)
        s2 = self.tls(ctx, session=session)
        self.assertTrue(s2.session_reused)
        s2.sendall(b"GET /big?n=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(self.read_response(s2)[2], b"x")

    def test_garbage_instead_of_a_client_hello_is_closed_and_logged(self):
        s = socket.create_connection((HOST, self.tls_port), timeout=5)
        self._sockets.append(s)
        s.sendall(b"\x00\x01garbage that is no TLS record\r\n\r\n" * 4)
        self.assert_closed_soon(s, 3)
        self.assertTrue(self.server.wait_for_log("TLS handshake failed"))
        self.assertGreater(metric(self.server, "ferry_tls_handshakes_total", result="failed"), 0)
        self.assertGreater(metric(self.server, "ferry_tls_handshakes_total", result="done"), 0)

    def test_plain_http_on_the_tls_port_is_closed(self):
        s = socket.create_connection((HOST, self.tls_port), timeout=5)
        self._sockets.append(s)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assert_closed_soon(s, 3)

    def test_a_client_hello_that_never_completes_is_closed_at_the_handshake_timeout(self):
        s = socket.create_connection((HOST, self.tls_port), timeout=5)
        self._sockets.append(s)
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a record of 512 bytes, 11 sent
        waited = self.assert_closed_soon(s, 5)
        self.assertGreater(waited, 0.5)
        self.assertTrue(self.server.wait_for_log("(http.ssl.handshake_timeout): closing"))

    def test_a_client_that_says_nothing_is_closed_at_the_handshake_timeout(self):
        s = socket.create_connection((HOST, self.tls_port), timeout=5)
        self._sockets.append(s)
        waited = self.assert_closed_soon(s, 5)
        self.assertGreater(waited, 0.5)

    def test_renegotiation_is_refused(self):
        # openssl s_client's "R" asks for a renegotiation (TLS 1.2): the server refuses it (no_renegotiation
        # alert), and goes on serving.
        p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{self.tls_port}", "-tls1_2",
                            "-CAfile", pki().path("ca.crt")], input=b"R\n", capture_output=True, timeout=15)
        out = (p.stdout + p.stderr).decode("latin-1")
        self.assertIn("RENEGOTIATING", out)
        self.assertIn("no renegotiation", out)  # the server's alert, as s_client reports it
        self.assertEqual(self.curl(path="/").returncode, 0, "the server still serves")


class Wss(TlsCase):
    SCRIPT = "ws.php"
    EXTRA = {"websockets": {"path": "/ws", "pool": {"num_workers": 1}}}

    def test_websocket_over_tls(self):
        ws = RawWs(self.server, "/ws", timeout=10)
        self.addCleanup(ws.close)
        ws.sock.close()
        ws.sock = self.tls()
        head = ws.handshake()
        self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
        big = b"m" * 200000  # many records each way
        for text in (b"hello over tls", big):
            ws.send(frame(1, text))
            op, data, _ = ws.read_frame()
            self.assertEqual((op, data), (1, text))
        ws.send(frame(1, b"big:300000"))
        op, data, _ = ws.read_frame()
        self.assertEqual((op, len(data)), (1, 300000))


class StalledClients(TlsCase):
    """After the handshake a TLS connection is an HTTP connection: a record that never completes is an idle
    client, a client that stops reading a large answer meets the write timeout."""
    SSL = {}
    EXTRA = {"metrics": {"address": f"{HOST}:0"}}

    @classmethod
    def setUpClass(cls):
        cls.SSL_HTTP = {"timeouts": {"idle": "1s", "write": "1s"}}
        super().setUpClass()

    def test_half_a_record_after_the_handshake_is_closed_at_the_idle_timeout(self):
        # The handshake through memory BIOs over a plain socket, so that the request's record can be cut.
        raw = socket.create_connection((HOST, self.tls_port), timeout=5)
        self._sockets.append(raw)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = pki().client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                raw.sendall(outgoing.read())
                incoming.write(raw.recv(65536))
        raw.sendall(outgoing.read())
        obj.write(b"GET /big?n=10 HTTP/1.1\r\nHost: x\r\n\r\n")
        record = outgoing.read()
        raw.sendall(record[: len(record) // 2])  # half the record: no byte of the request can be decrypted
        t0 = time.monotonic()
        raw.settimeout(5)
        got = b""
        try:
            while True:
                chunk = raw.recv(65536)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
        waited = time.monotonic() - t0
        self.assertGreater(waited, 0.5)
        self.assertLess(waited, 4)
        incoming.write(got)
        plain = b""
        try:
            while True:
                data = obj.read(65536)
                if not data:
                    break
                plain += data
        except ssl.SSLError:  # want-read at the end of what came, or the close
            pass
        self.assertNotIn(b"HTTP/1.1", plain, "nothing was answered: no request was read")

    def test_a_client_that_stops_reading_a_large_answer_meets_the_write_timeout(self):
        s = self.tls(timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /big?n=50000000 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(self.server.wait_for_log("(http.timeouts.write): closing the connection", 10))
        self.assertEqual(self.curl(path="/big?n=3").stdout, b"xxx", "the server still serves")


class HandshakeCap(TlsCase):
    SSL = {"max_handshakes": 2, "handshake_timeout": "5s"}
    EXTRA = {"metrics": {"address": f"{HOST}:0"}}

    def test_past_max_handshakes_a_connection_is_closed_at_once(self):
        idle = [socket.create_connection((HOST, self.tls_port), timeout=5) for _ in range(2)]
        self._sockets.extend(idle)
        time.sleep(0.3)  # both are in their handshake
        third = socket.create_connection((HOST, self.tls_port), timeout=5)
        self._sockets.append(third)
        self.assertLess(self.assert_closed_soon(third, 2), 1.5)
        self.assertTrue(self.server.wait_for_log("2 TLS handshakes in progress (http.ssl.max_handshakes)"))
        self.assertEqual(metric(self.server, "ferry_tls_handshakes_total", result="refused"), 1)
        for s in idle:
            s.close()
        self.assertTrue(wait_until(lambda: self.curl(path="/").returncode == 0, 5), "served again")


class Redirect(TlsCase):
    SSL = {"redirect": True}

    def test_plain_http_answers_308_to_the_https_url(self):
        for method in ("GET", "POST", "HEAD"):
            status, headers, body = self.server.request(method, "/a/b?c=d&e=%20f", body=b"x" if method == "POST" else None)
            self.assertEqual(status, 308, method)
            self.assertEqual(dict(headers)["Location"], f"https://127.0.0.1:{self.tls_port}/a/b?c=d&e=%20f")
        p = subprocess.run(["curl", "-sS", "-L", "--cacert", pki().path("ca.crt"),
                            f"http://127.0.0.1:{self.server.port}/followed?q=1"], capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["uri"], f"https://127.0.0.1:{self.tls_port}/followed?q=1")


class Sni(TlsCase):
    """http.ssl.certs: a certificate by the name the client asks for (SNI), the main one for any other."""

    @classmethod
    def setUpClass(cls):
        cls.SSL = {"certs": [{"cert": pki().path("app.crt"), "key": pki().path("app.key"),
                              "hosts": ["APP.test", "*.wild.test"]}]}
        super().setUpClass()

    def subject_for(self, name):
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        s = self.tls(ctx, server_hostname=name)
        der = s.getpeercert(binary_form=True)
        p = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject"], input=der, capture_output=True)
        return p.stdout.decode().strip()

    def test_the_certificate_follows_the_name_asked_for(self):
        self.assertIn("CN = app.test", self.subject_for("app.test"))
        self.assertIn("CN = app.test", self.subject_for("App.Test"), "case does not matter")
        self.assertIn("CN = app.test", self.subject_for("x.wild.test"))
        self.assertIn("CN = 127.0.0.1", self.subject_for("a.b.wild.test"), "a wildcard covers one label")
        self.assertIn("CN = 127.0.0.1", self.subject_for("other.test"))
        self.assertIn("CN = 127.0.0.1", self.subject_for(None), "no SNI: the main certificate")
        # curl verifies the name against the certificate it got.
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", pki().path("ca.crt"), "--resolve",
                            f"app.test:{self.tls_port}:127.0.0.1", f"https://app.test:{self.tls_port}/sni"],
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["uri"], f"https://app.test:{self.tls_port}/sni")


class ClientCertificates(TlsCase):
    SSL = {"root_ca": "", "client_auth_type": "require_and_verify_client_cert"}

    @classmethod
    def setUpClass(cls):
        cls.SSL = dict(cls.SSL, root_ca=pki().path("ca.crt"))
        super().setUpClass()

    def test_a_verified_certificate_is_required_and_its_subject_reaches_php(self):
        p = self.curl("--cert", pki().path("alice.crt"), "--key", pki().path("alice.key"), path="/who")
        self.assertEqual(p.returncode, 0, p.stderr)
        attrs = json.loads(p.stdout)["attributes"]
        self.assertEqual(attrs, {"SSL_CLIENT_S_DN": "CN=alice,O=Ferry Test", "SSL_CLIENT_VERIFY": "SUCCESS"})
        # Two requests on one connection: the second gets them too (read once, kept with the connection).
        p = self.curl("--cert", pki().path("alice.crt"), "--key", pki().path("alice.key"),
                      f"https://127.0.0.1:{self.tls_port}/first", path="/second")
        self.assertEqual(p.returncode, 0, p.stderr)
        first, end = json.JSONDecoder().raw_decode(p.stdout.decode())
        second = json.loads(p.stdout.decode()[end:])
        self.assertEqual(first["attributes"], attrs)
        self.assertEqual(second["attributes"], attrs)
        self.assertNotEqual(self.curl(path="/who").returncode, 0, "no certificate: refused")
        p = self.curl("--cert", pki().path("mallory.crt"), "--key", pki().path("mallory.key"), path="/who")
        self.assertNotEqual(p.returncode, 0, "a certificate from another CA: refused")


class RequestedCertificates(TlsCase):
    SSL = {"client_auth_type": "request_client_cert"}

    def test_a_certificate_is_asked_for_not_required_nor_verified(self):
        p = self.curl(path="/who")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["attributes"], {})
        p = self.curl("--cert", pki().path("mallory.crt"), "--key", pki().path("mallory.key"), path="/who")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["attributes"],
                         {"SSL_CLIENT_S_DN": "CN=mallory", "SSL_CLIENT_VERIFY": "GENEROUS"})


if __name__ == "__main__":
    unittest.main()
