"""The end-to-end tests' clients of a running server (stdlib only; harness.py re-exports them): a raw HTTP
response reader, the Goridge RPC client, /metrics through the reference parser, the small probe listeners."""

import json
import re
import socket
import struct
import sys
import zlib

HOST = "127.0.0.1"
SOCK_TIMEOUT = 10.0


class Response:
    def __init__(self, status, reason, headers, body, version):
        self.status, self.reason, self.headers, self.body, self.version = status, reason, headers, body, version

    def header(self, name):
        """First value of header `name` (case-insensitive) or None."""
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:200]!r}>"


class Reader:
    """Buffered reader over a socket that parses HTTP responses (bounded in size and time)."""

    MAX = 64 * 1024 * 1024

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        if self.eof:
            return False
        chunk = self.sock.recv(65536)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        if len(self.buf) > self.MAX:
            raise AssertionError("response too large")
        return True

    def read_until(self, delim):
        while delim not in self.buf:
            if not self._fill():
                raise EOFError(f"connection closed before {delim!r}; got {self.buf[:200]!r}")
        i = self.buf.index(delim) + len(delim)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_exact(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"connection closed after {len(self.buf)} of {n} bytes")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_to_eof(self):
        while self._fill():
            pass
        out, self.buf = self.buf, b""
        return out

    def read_head(self):
        head = self.read_until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        version, status, *reason = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            if line:
                k, v = line.split(":", 1)
                headers.append((k, v.strip()))
        return version, int(status), (reason[0] if reason else ""), headers

    def read_response(self, head_request=False):
        """Reads one final response (skipping nothing: a 1xx is returned as is)."""
        version, status, reason, headers = self.read_head()
        r = Response(status, reason, headers, b"", version)
        if head_request or 100 <= status < 200 or status in (204, 304):
            return r
        te = r.header("Transfer-Encoding")
        cl = r.header("Content-Length")
        if te and "chunked" in te.lower():
            body = b""
            for _ in range(100000):
                size = int(self.read_until(b"\r\n").split(b";")[0].strip(), 16)
                if size == 0:
                    self.read_until(b"\r\n")  # no trailers expected
                    break
                body += self.read_exact(size)
                self.read_exact(2)
            r.body = body
        elif cl is not None:
            r.body = self.read_exact(int(cl))
        else:
            r.body = self.read_to_eof()
        return r

    def closed_by_peer(self, timeout=3.0):
        """True if the peer closes (EOF or reset) within timeout with no further bytes."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        if data:
            self.buf += data
            return False
        return True


def metrics_address(srv):
    """(host, port) of a server's metrics listener (metrics.address), from its start-up log line."""
    m = re.search(r"metrics: Prometheus metrics on http://(\S+)/metrics", srv.stderr())
    assert m, srv.stderr()
    host, port = m.group(1).rsplit(":", 1)
    return host, int(port)


def goridge_frame(flags, payload, options=()):
    """A Goridge v3 frame (docs/protocol.md §1): header with CRC, option words, payload."""
    hl = 3 + len(options)
    head = bytes([0x10 | hl, flags]) + struct.pack("<I", len(payload))
    head += struct.pack("<I", zlib.crc32(head[:6])) + b"\0\0" + b"".join(struct.pack("<I", o) for o in options)
    return head + payload


def read_goridge_frame(sock):
    """(flags, options, payload) of the next Goridge frame on `sock`; EOFError if it closes first."""
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError(f"closed after {len(buf)} of {n} bytes")
            buf += chunk
        return buf
    head = exact(12)
    size = struct.unpack("<I", head[2:6])[0]
    opts = exact(4 * ((head[0] & 0x0F) - 3))
    options = [struct.unpack("<I", opts[i:i + 4])[0] for i in range(0, len(opts), 4)]
    return head[1], options, exact(size) if size else b""


class Rpc:
    """A raw client of the RPC listener (docs/protocol.md §6), over "unix://path" or "tcp://host:port"."""

    def __init__(self, address, timeout=60):
        if address.startswith("unix://"):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(timeout)
            self.sock.connect(address[len("unix://"):])
        else:
            host, port = address[len("tcp://"):].rsplit(":", 1)
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.seq = 0

    def call(self, method, arg=None, raw_body=None):
        """(ok, decoded result or error text); raw_body: the call's bytes as they are, not `arg` as JSON"""
        self.seq += 1
        m = method.encode()
        body = raw_body if raw_body is not None else json.dumps(arg).encode()
        self.sock.sendall(goridge_frame(0x08, m + body, (self.seq, len(m))))
        flags, options, payload = read_goridge_frame(self.sock)
        assert options[0] == self.seq, options
        body = payload[options[1]:]
        if flags & 0x40:
            return False, body.decode()
        return True, json.loads(body)

    def close(self):
        self.sock.close()


def scrape(srv):
    """{(name, frozenset(labels)): value} of every sample of a server's /metrics, parsed by the reference
    parser (Debian's python3-prometheus-client)."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:  # a Python of its own beside Debian's: the package is Debian's
        sys.path.append("/usr/lib/python3/dist-packages")
        from prometheus_client.parser import text_string_to_metric_families
    status, _, body = probe_get(metrics_address(srv), "/metrics")
    assert status == 200, (status, body)
    out = {}
    for f in text_string_to_metric_families(body):
        for s in f.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def metric(srv, name, **labels):
    """One sample of a server's /metrics."""
    return scrape(srv)[(name, frozenset(labels.items()))]


def probe_get(addr, target, method="GET", raw=None):
    """(status, head text, body text) of one request to a small listener that closes after answering
    (status.address, metrics.address)."""
    s = socket.create_connection(addr, timeout=SOCK_TIMEOUT)
    try:
        s.sendall(raw if raw is not None else f"{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head.decode("latin-1"), body.decode()


def raw_exchange(server, data, head_request=False, timeout=SOCK_TIMEOUT):
    """Sends raw bytes on a fresh connection and reads one response: (Response, Reader)."""
    s = server.socket(timeout)
    s.sendall(data)
    rd = Reader(s)
    return rd.read_response(head_request=head_request), rd
