"""WebSocket clients for the end-to-end tests.

- NodeWs: real clients (the npm `ws` package) driven through tests/e2e/node/ws_driver.js, one Node process
  holding any number of named connections; events come back as JSON lines.
- RawWs: a hand-made client over a plain socket (handshake, then any bytes, masked or not), for malformed
  frames the real clients refuse to send.
"""

import base64
import json
import os
import queue
import socket
import struct
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")


def node_ready():
    """'' when Node and the npm packages are there, else what is missing (scripts/setup.sh installs them)."""
    if subprocess.run(["sh", "-c", "command -v node"], capture_output=True).returncode != 0:
        return "node is not installed"
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "ws")):
        return "tests/e2e/node/node_modules/ws is missing (run scripts/setup.sh)"
    return ""


class NodeWs:
    def __init__(self):
        missing = node_ready()
        if missing:
            raise AssertionError(missing)
        self.proc = subprocess.Popen(["node", "ws_driver.js"], cwd=NODE_DIR, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.events = queue.Queue()
        self.backlog = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line:
                self.events.put(json.loads(line))
        self.events.put({"ev": "eof"})

    def cmd(self, cmd, name="a", **kw):
        self.proc.stdin.write(json.dumps(dict(cmd=cmd, name=name, **kw)) + "\n")
        self.proc.stdin.flush()

    def connect(self, url, name="a", protocols=None, headers=None, wait=True, **kw):
        self.cmd("connect", name, url=url, protocols=protocols or [], headers=headers or {}, **kw)
        if wait:
            return self.expect("open", name)
        return None

    def send(self, data, name="a", binary=False):
        if isinstance(data, bytes):
            self.cmd("send", name, b64=base64.b64encode(data).decode(), binary=True)
        else:
            self.cmd("send", name, data=data, binary=binary)

    def expect(self, ev, name="a", timeout=10.0, where=None):
        """The first event `ev` of connection `name` (matching `where`); other events wait in the backlog."""
        for i, e in enumerate(self.backlog):
            if e.get("ev") == ev and e.get("name") == name and (where is None or where(e)):
                return self.backlog.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {ev} event for {name} within {timeout}s; seen: {self.backlog[-10:]}")
            try:
                e = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if e.get("ev") == "eof":
                raise AssertionError(f"the node driver ended: {self.proc.stderr.read()}")
            if e.get("ev") == ev and e.get("name") == name and (where is None or where(e)):
                return e
            self.backlog.append(e)

    def message(self, name="a", timeout=10.0):
        return self.expect("message", name, timeout)

    def text(self, name="a", timeout=10.0):
        e = self.message(name, timeout)
        if e.get("binary"):
            raise AssertionError(f"expected a text message, got binary: {e}")
        return e["data"]

    def drain(self, wait=0.3):
        """Everything that arrives within `wait` seconds (and the backlog)."""
        out = list(self.backlog)
        self.backlog = []
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            try:
                out.append(self.events.get(timeout=left))
            except queue.Empty:
                return out

    def close(self):
        if self.proc.poll() is None:
            try:
                self.cmd("exit")
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass


KEY = "dGhlIHNhbXBsZSBub25jZQ=="
ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 §1.3's example


def frame(opcode, payload=b"", fin=True, mask=True, rsv=0, length=None):
    """A client frame with any flaw the tests need (unmasked, reserved bits, a wrong length...)."""
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload) if length is None else length
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + struct.pack("!H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack("!Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(c ^ key[i % 4] for i, c in enumerate(payload))


def close_payload(code, reason=b""):
    return struct.pack("!H", code) + reason


class RawWs:
    """A plain-socket client: handshake() then send() raw bytes, read_frame() server frames."""

    def __init__(self, server, path="/ws", timeout=10.0, rcvbuf=None):
        if rcvbuf:
            # Set before connecting: the window the server sees stays small.
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.settimeout(timeout)
            self.sock.connect(("127.0.0.1", server.port))
        else:
            self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.server = server
        self.path = path
        self.buf = b""

    def handshake(self, extra=""):
        req = (f"GET {self.path} HTTP/1.1\r\nHost: {self.server.address}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n")
        self.sock.sendall(req.encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed during the handshake: {self.buf!r}")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head.decode("latin-1")

    def send(self, data):
        self.sock.sendall(data)

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError(f"connection closed with {len(self.buf)} of {n} bytes")
            self.buf += chunk

    def read_frame(self):
        """(opcode, payload, fin) of the next server frame; server frames must not be masked."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        if b1 & 0x80:
            raise AssertionError("the server sent a masked frame")
        n = b1 & 0x7F
        off = 2
        if n == 126:
            self._need(4)
            n = struct.unpack("!H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10)
            n = struct.unpack("!Q", self.buf[2:10])[0]
            off = 10
        self._need(off + n)
        payload = self.buf[off:off + n]
        self.buf = self.buf[off + n:]
        return b0 & 0x0F, payload, bool(b0 & 0x80)

    def read_close(self):
        """The close code and reason the server sends (skipping other frames); (None, b'') at EOF."""
        while True:
            try:
                op, payload, _ = self.read_frame()
            except EOFError:
                return None, b""
            if op == 8:
                if len(payload) < 2:
                    return 1005, b""
                return struct.unpack("!H", payload[:2])[0], payload[2:]

    def at_eof(self, timeout=5.0):
        """True when the server closed the TCP connection (after its close frame) within timeout."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except (socket.timeout, TimeoutError):
            return False
        except ConnectionResetError:
            return True

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class SseClient:
    """A server-sent events client over a plain socket: the request, the response head, then the chunked
    event stream parsed into events ({"id", "data", "comment"})."""

    def __init__(self, server, target, headers="", timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
        self.sock.settimeout(timeout)
        req = f"GET {target} HTTP/1.1\r\nHost: {server.address}\r\nAccept: text/event-stream\r\n{headers}\r\n"
        self.sock.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError(f"closed before the response head: {self.buf!r}")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        self.text = ""  # de-chunked stream not yet parsed into events
        self.ended = False  # the terminating chunk came

    def body(self):
        """A non-stream answer's body (Content-Length)."""
        n = int(self.headers.get("content-length", "0"))
        while len(self.buf) < n:
            self.buf += self.sock.recv(65536)
        return self.buf[:n].decode()

    def _dechunk(self):
        while True:
            if b"\r\n" not in self.buf:
                return
            size_line, rest = self.buf.split(b"\r\n", 1)
            size = int(size_line, 16)
            if size == 0:
                self.ended = True
                self.buf = rest
                return
            if len(rest) < size + 2:
                return
            self.text += rest[:size].decode()
            self.buf = rest[size + 2:]

    def event(self, timeout=10.0):
        """The next event (or comment); None when the stream ended."""
        deadline = time.monotonic() + timeout
        self._dechunk()  # what came with the response head
        while "\n\n" not in self.text:
            if self.ended:
                return None
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                self._dechunk()
                if "\n\n" in self.text:
                    break
                return None
            self.buf += chunk
            self._dechunk()
        block, self.text = self.text.split("\n\n", 1)
        ev = {"id": None, "data": None, "comment": None}
        data = []
        for line in block.split("\n"):
            if line.startswith(":"):
                ev["comment"] = line[1:]
            elif line.startswith("id: "):
                ev["id"] = int(line[4:])
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            ev["data"] = "\n".join(data)
        return ev

    def data_event(self, timeout=10.0):
        """The next event that carries data (heartbeats skipped)."""
        while True:
            ev = self.event(timeout)
            if ev is None or ev["data"] is not None:
                return ev

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
