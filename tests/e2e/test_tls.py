"""http.ssl (issue 45): HTTPS on its own address with certificates the test makes with `openssl` — real curl
and Python's ssl as clients; TLS 1.2 and 1.3 only; keep-alive, pipelining, large bodies and static files over
TLS; WebSockets over TLS (wss); the 308 redirect from plain HTTP; client certificates as client_auth_type
says, their subject given to PHP; session resumption; certificates reloaded by SIGHUP and when the file
changes, open connections keeping theirs; and the handshake's limits: a timeout, a cap on handshakes in
progress, garbage or plain HTTP instead of a ClientHello, a record that never completes — each closed and
logged, none costing a PHP request."""

import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from harness import BIN, HOST, Server, ServerTestCase, metric, wait_until
from wsclient import RawWs, frame


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


class Pki:
    """A CA, a server certificate for 127.0.0.1 signed by it, a client certificate (alice) signed by it, and a
    client certificate from another CA (mallory), all P-256, made with the openssl command."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ferry-tls-")
        self.dir = self.tmp.name
        self.ca("ca", "Ferry Test CA")
        self.ca("other-ca", "Another CA")
        self.leaf("server", "ca", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost")
        self.leaf("alice", "ca", "/O=Ferry Test/CN=alice", "extendedKeyUsage=clientAuth")
        self.leaf("mallory", "other-ca", "/CN=mallory", "extendedKeyUsage=clientAuth")

    def path(self, name):
        return os.path.join(self.dir, name)

    def key(self, name):
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key",
                cwd=self.dir)

    def ca(self, name, cn):
        self.key(name)
        openssl("req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj",
                f"/CN={cn}", "-addext", "basicConstraints=critical,CA:true", cwd=self.dir)

    def leaf(self, name, ca, subject, ext):
        self.key(name)
        openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=self.dir)
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=self.dir)

    def client_context(self, cert=None, **versions):
        ctx = ssl.create_default_context(cafile=self.path("ca.crt"))
        if cert:
            ctx.load_cert_chain(self.path(f"{cert}.crt"), self.path(f"{cert}.key"))
        for k, v in versions.items():
            setattr(ctx, k, v)
        return ctx


PKI = None


def setUpModule():
    global PKI
    PKI = Pki()
    os.mkdir(PKI.path("public"))
    for name, size in (("small.bin", 1024), ("large.bin", 1 << 20)):
        with open(PKI.path(f"public/{name}"), "wb") as f:
            f.write(os.urandom(size))


def tearDownModule():
    PKI.tmp.cleanup()


def https_port(srv):
    line = next(x for x in srv.stdout_lines if x.startswith("listening on https://"))
    return int(line.rsplit(":", 1)[1])


def ssl_config(**more):
    base = {"address": f"{HOST}:0", "cert": PKI.path("server.crt"), "key": PKI.path("server.key")}
    base.update(more)
    return base


class TlsCase(ServerTestCase):
    SSL = {}
    EXTRA = {}

    @classmethod
    def setUpClass(cls):
        http = dict(getattr(cls, "SSL_HTTP", {}), ssl=ssl_config(**cls.SSL))
        cls.CONFIG = dict({"http": http, "logs": {"level": "debug"}}, **cls.EXTRA)
        super().setUpClass()
        cls.tls_port = https_port(cls.server)

    def tls(self, ctx=None, timeout=10, **kw):
        """A connected TLS socket (handshake done)."""
        raw = socket.create_connection((HOST, self.tls_port), timeout=timeout)
        s = (ctx or PKI.client_context()).wrap_socket(raw, server_hostname="127.0.0.1", **kw)
        self._sockets.append(s)
        return s

    def curl(self, *args, path="/"):
        return subprocess.run(["curl", "-sS", "--max-time", "15", "--cacert", PKI.path("ca.crt"), *args,
                               f"https://127.0.0.1:{self.tls_port}{path}"], capture_output=True, timeout=20)

    def read_response(self, s):
        """(status line, headers dict, body) of one Content-Length response read from socket `s`."""
        buf = getattr(s, "_pending", b"")
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError(buf)
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
        n = int(headers.get("content-length", "0"))
        while len(buf) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError(buf)
            buf += chunk
        s._pending = buf[n:]
        return lines[0], headers, buf[:n]

    def assert_closed_soon(self, s, within):
        """The server closes `s` (EOF or a reset) within `within` seconds, without a byte of HTTP."""
        s.settimeout(within)
        t0 = time.monotonic()
        got = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except ConnectionResetError:
            pass
        except socket.timeout:
            self.fail(f"still open after {within}s")
        self.assertNotIn(b"HTTP/1.1", got)
        return time.monotonic() - t0


class Https(TlsCase):
    SSL = {"handshake_timeout": "1s"}
    EXTRA = {"metrics": {"address": f"{HOST}:0"}}

    @classmethod
    def setUpClass(cls):
        cls.SSL_HTTP = {"middleware": ["static"], "static": {"dir": PKI.path("public")}}  # PKI: made by now
        super().setUpClass()

    def test_static_files_small_large_and_ranges(self):
        for name in ("small.bin", "large.bin"):
            with open(PKI.path(f"public/{name}"), "rb") as f:
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
        self.assertIn("ALPN: server accepted http/1.1", err)

    def test_tls12_works_and_older_versions_are_refused(self):
        p = self.curl("--tls-max", "1.2", path="/")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = self.tls(PKI.client_context(maximum_version=ssl.TLSVersion.TLSv1_2))
        self.assertEqual(s.version(), "TLSv1.2")
        self.assertIn(s.cipher()[0], ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                                      "ECDHE-ECDSA-CHACHA20-POLY1305"))
        old = PKI.client_context(maximum_version=ssl.TLSVersion.TLSv1_1)
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
        ctx = PKI.client_context()
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
                            "-CAfile", PKI.path("ca.crt")], input=b"R\n", capture_output=True, timeout=15)
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
        obj = PKI.client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
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
        p = subprocess.run(["curl", "-sS", "-L", "--cacert", PKI.path("ca.crt"),
                            f"http://127.0.0.1:{self.server.port}/followed?q=1"], capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["uri"], f"https://127.0.0.1:{self.tls_port}/followed?q=1")


class ClientCertificates(TlsCase):
    SSL = {"root_ca": "", "client_auth_type": "require_and_verify_client_cert"}

    @classmethod
    def setUpClass(cls):
        cls.SSL = dict(cls.SSL, root_ca=PKI.path("ca.crt"))
        super().setUpClass()

    def test_a_verified_certificate_is_required_and_its_subject_reaches_php(self):
        p = self.curl("--cert", PKI.path("alice.crt"), "--key", PKI.path("alice.key"), path="/who")
        self.assertEqual(p.returncode, 0, p.stderr)
        attrs = json.loads(p.stdout)["attributes"]
        self.assertEqual(attrs, {"SSL_CLIENT_S_DN": "CN=alice,O=Ferry Test", "SSL_CLIENT_VERIFY": "SUCCESS"})
        self.assertNotEqual(self.curl(path="/who").returncode, 0, "no certificate: refused")
        p = self.curl("--cert", PKI.path("mallory.crt"), "--key", PKI.path("mallory.key"), path="/who")
        self.assertNotEqual(p.returncode, 0, "a certificate from another CA: refused")


class RequestedCertificates(TlsCase):
    SSL = {"client_auth_type": "request_client_cert"}

    def test_a_certificate_is_asked_for_not_required_nor_verified(self):
        p = self.curl(path="/who")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["attributes"], {})
        p = self.curl("--cert", PKI.path("mallory.crt"), "--key", PKI.path("mallory.key"), path="/who")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["attributes"],
                         {"SSL_CLIENT_S_DN": "CN=mallory", "SSL_CLIENT_VERIFY": "GENEROUS"})


class Reload(unittest.TestCase):
    def start(self):
        self.dir = tempfile.TemporaryDirectory(prefix="ferry-tls-reload-")
        self.addCleanup(self.dir.cleanup)
        self.cert, self.key = os.path.join(self.dir.name, "s.crt"), os.path.join(self.dir.name, "s.key")
        self.install("server")
        srv = Server({"http": {"ssl": {"address": f"{HOST}:0", "cert": self.cert, "key": self.key}}}).start()
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        return srv, https_port(srv)

    def install(self, name, cn=None):
        """Puts a certificate in place as a renewal does: written aside, then renamed over the old one."""
        if cn:
            openssl("req", "-x509", "-new", "-key", PKI.path("server.key"), "-out", self.cert + ".new", "-days",
                    "2", "-subj", f"/CN={cn}", "-addext", "subjectAltName=IP:127.0.0.1", cwd=PKI.dir)
        else:
            with open(PKI.path(f"{name}.crt"), "rb") as f, open(self.cert + ".new", "wb") as g:
                g.write(f.read())
        with open(PKI.path("server.key"), "rb") as f, open(self.key, "wb") as g:
            g.write(f.read())
        os.replace(self.cert + ".new", self.cert)

    def subject(self, port, sock=None):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = sock or ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5))
        der = s.getpeercert(binary_form=True)
        p = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject"], input=der,
                           capture_output=True)
        if sock is None:
            s.close()
        return p.stdout.decode().strip()

    def test_sighup_and_a_changed_file_load_the_new_certificate_open_connections_keep_theirs(self):
        srv, port = self.start()
        self.assertIn("CN = 127.0.0.1", self.subject(port))
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        kept = ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5))
        self.addCleanup(kept.close)
        kept.sendall(b"GET /big?n=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"x", kept.recv(65536))  # the TLS 1.3 ticket came with it
        session = kept.session
        self.install(None, cn="renewed-by-sighup")
        os.kill(srv.proc.pid, signal.SIGHUP)
        self.assertTrue(srv.wait_for_log("SIGHUP: certificate reloaded"))
        self.assertIn("renewed-by-sighup", self.subject(port))
        # The ticket keys are the server's, not the certificate's: a session from before the reload resumes.
        resumed = ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5), session=session)
        self.addCleanup(resumed.close)
        self.assertTrue(resumed.session_reused)
        # The connection opened before still works, with its certificate.
        kept.sendall(b"GET /big?n=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"xxx", kept.recv(65536))
        self.assertIn("CN = 127.0.0.1", self.subject(port, kept))
        # A renewal without a signal: the file changes, the server sees it within a few seconds.
        self.install(None, cn="renewed-on-disk")
        self.assertTrue(wait_until(lambda: "renewed-on-disk" in self.subject(port), 10), srv.stderr())
        self.assertTrue(srv.wait_for_log("a certificate file changed: certificate reloaded"))
        # A broken file: logged, the current certificate stays.
        with open(self.cert, "w") as f:
            f.write("not a certificate\n")
        self.assertTrue(srv.wait_for_log("the certificate was not reloaded, the current one stays", 10))
        self.assertIn("renewed-on-disk", self.subject(port))


class ChatInTheBrowser(unittest.TestCase):
    """examples/chat served over HTTPS: Chromium loads the page, signs two users in, chats over wss:// and reads
    the feed (server-sent events) over TLS (tests/e2e/node/chat_browser.js)."""

    def test_two_users_chat_over_https_and_wss(self):
        from test_chat import browser_missing, chat_server
        from wsclient import NODE_DIR
        missing = browser_missing()
        if missing:
            self.fail(missing)
        srv = chat_server(["-o", f"http.ssl.address={HOST}:0", "-o", f"http.ssl.cert={PKI.path('server.crt')}",
                           "-o", f"http.ssl.key={PKI.path('server.key')}"])
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        port = https_port(srv)
        p = subprocess.run(["node", "chat_browser.js", f"https://127.0.0.1:{port}"], cwd=NODE_DIR,
                           capture_output=True, text=True, timeout=90)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        self.assertTrue(lines, p.stderr)
        result = json.loads(lines[-1])
        self.assertEqual(result["result"], "ok", json.dumps(result, indent=1) + "\n" + srv.stderr()[-3000:])
        d = result["detail"]
        self.assertTrue(d["secure"], "the page is a secure context served over https")
        self.assertIn("alice: hello from alice", d["bob"]["messages"])
        self.assertIn("bob joined", d["alice"]["feed"])


class Errors(unittest.TestCase):
    def test_unreadable_or_mismatched_files_name_the_key(self):
        cases = [
            ({"cert": "/nonexistent/s.crt", "key": PKI.path("server.key")},
             "http.ssl.cert: cannot use /nonexistent/s.crt"),
            ({"cert": PKI.path("server.crt"), "key": PKI.path("alice.key")},
             "http.ssl.key: " + PKI.path("alice.key") + " is not the key of"),
            ({"cert": PKI.path("server.crt"), "key": PKI.path("server.key"),
              "client_auth_type": "require_and_verify_client_cert"},
             "http.ssl.root_ca: required by client_auth_type"),
        ]
        for section, message in cases:
            srv = Server({"http": {"ssl": dict({"address": f"{HOST}:0"}, **section)}})
            self.addCleanup(srv.close)
            p = subprocess.run([BIN, "serve", "-c", srv.config_path], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(message, p.stderr)
            self.assertNotIn("listening", p.stdout)


if __name__ == "__main__":
    unittest.main()
