"""What the TLS tests share (test_tls.py, test_tls_ops.py): certificates made with the openssl command (a CA, a
server certificate for 127.0.0.1, client certificates from it and from another CA, files for the static
handler), and a server case with http.ssl whose clients speak TLS (Python's ssl, curl)."""

import os
import socket
import ssl
import subprocess
import tempfile
import time

from harness import HOST, ServerTestCase


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
        self.leaf("app", "ca", "/CN=app.test", "subjectAltName=DNS:app.test,DNS:*.wild.test")  # http.ssl.certs
        os.mkdir(self.path("public"))  # files for the static handler
        for name, size in (("small.bin", 1024), ("large.bin", 1 << 20)):
            with open(self.path(f"public/{name}"), "wb") as f:
                f.write(os.urandom(size))

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


_pki = None


def pki():
    """The test run's certificates (made once, removed with the temporary directory at exit)."""
    global _pki
    if _pki is None:
        _pki = Pki()
    return _pki


def https_port(srv):
    line = next(x for x in srv.stdout_lines if x.startswith("listening on https://"))
    return int(line.rsplit(":", 1)[1])


def ssl_config(**more):
    base = {"address": f"{HOST}:0", "cert": pki().path("server.crt"), "key": pki().path("server.key")}
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

    def tls(self, ctx=None, timeout=10, server_hostname="127.0.0.1", **kw):
        """A connected TLS socket (handshake done); `server_hostname` None sends no SNI."""
        raw = socket.create_connection((HOST, self.tls_port), timeout=timeout)
        s = (ctx or pki().client_context()).wrap_socket(raw, server_hostname=server_hostname, **kw)
        self._sockets.append(s)
        return s

    def curl(self, *args, path="/"):
        return subprocess.run(["curl", "-sS", "--max-time", "15", "--cacert", pki().path("ca.crt"), *args,
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
