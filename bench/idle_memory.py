#!/usr/bin/env python3
"""Memory Ferry keeps per idle keep-alive connection (RSS of the ferry process, workers excluded), after
small and after large requests and responses.

    python3 bench/idle_memory.py [connections] [--large-connections M] [--bin PATH] [--only a,b] [--tls | --h2]

Each scenario runs against its own fresh ferry (`--bin`, default build/ferry) serving the echo fixture
tests/php/echo.php (2 workers, `http.limits.max_header_size: 128KB`), on fresh connections:

    small     GET /                                   (~0.7 KB JSON answer)    `connections` (default 2000)
    resp-1m   GET /big?n=1048576                      (1 MiB answer)           M (default 2000)
    hdr-60k   GET /status/200 with a 60 KB header     (short answer)           M
    post-250k POST /echo-body with 250 KB             (the 250 KB echoed back) M

A scenario first makes its request on a few warm-up connections, which stay open (so buffers that do
not belong to one connection, such as the worker pipes', are not counted), then reads ferry's RSS, opens
the measured connections, reads RSS again, makes the request once on each connection (in batches across
connections, checking every answer) and, with every connection idle in keep-alive, reads RSS a last
time. It prints one line per scenario with KiB per connection when connected and when idle after the
request, then "max: X KiB per idle connection" (the largest idle-after-request figure; the project's goal
is at most 16 KiB). Everything runs on 127.0.0.1 and stops by itself; RLIMIT_NOFILE is raised as needed
(ferry inherits it). The exit status is 0 whatever the figures: this measures, it does not judge.
With --tls every connection is HTTPS (http.ssl with a P-256 certificate made by `openssl`; TLS 1.3): the
figures then include what OpenSSL keeps per connection. With --h2 every connection is HTTP/2 over TLS (ALPN
h2; Python's h2 from Debian's python3-h2): the figures then include nghttp2's session and HPACK tables.
"""
import argparse
import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "php", "echo.php")
IO_THREADS = 1  # --io-threads
WARMUP = 4          # warm-up connections per scenario, kept open while measuring
BATCH = 32          # requests in flight at once (one per connection)
SETTLE = 0.5        # seconds to wait before reading RSS

MIB = 1024 * 1024
HEADER_PAD = 60 * 1000
POST_SIZE = 250 * 1000


class Scenario:
    def __init__(self, name, what, request, check, static=False):
        self.name, self.what, self.request, self.check = name, what, request, check
        self.static = static  # served by the static handler (http.static on, a 1 MiB file in its dir)


def _expect(status, body_len=None, body=None):
    def check(st, got):
        if st != status:
            return f"status {st}, expected {status}"
        if body_len is not None and len(got) != body_len:
            return f"body of {len(got)} bytes, expected {body_len}"
        if body is not None and got != body:
            return "echoed body differs from the one sent"
        return None
    return check


def scenarios():
    post_body = bytes((i * 7 + 13) % 251 for i in range(POST_SIZE))
    pad = b"p" * HEADER_PAD
    return [
        Scenario("small", "GET / (small answer)",
                 b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", _expect(200)),
        Scenario("resp-1m", "GET /big?n=1048576 (1 MiB answer)",
                 b"GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n" % MIB, _expect(200, body_len=MIB)),
        Scenario("hdr-60k", "GET /status/200 with a 60 KB header",
                 b"GET /status/200 HTTP/1.1\r\nHost: x\r\nX-Pad: " + pad + b"\r\n\r\n", _expect(200)),
        Scenario("post-250k", "POST /echo-body, 250 KB echoed",
                 b"POST /echo-body HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 b"Content-Length: %d\r\n\r\n" % POST_SIZE + post_body,
                 _expect(200, body=post_body)),
        Scenario("static-1m", "GET /file-1m.bin from http.static (sendfile)",
                 b"GET /file-1m.bin HTTP/1.1\r\nHost: x\r\n\r\n", _expect(200, body_len=MIB), static=True),
    ]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Conn:
    """One client connection with just enough HTTP/1.1 to read Content-Length and chunked answers (or, with
    --h2, an HTTP/2 connection sending the same requests as streams)."""

    tls = None  # an ssl.SSLContext with --tls or --h2
    h2 = False

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if Conn.tls is not None:
            self.sock = Conn.tls.wrap_socket(self.sock)
        self.buf = bytearray()
        if Conn.h2:
            from h2.config import H2Configuration
            from h2.connection import H2Connection
            self.h2c = H2Connection(H2Configuration(client_side=True))
            self.h2c.initiate_connection()
            self.sock.sendall(self.h2c.data_to_send())

    def send(self, request):
        if not Conn.h2:
            self.sock.sendall(request)
            return
        head, _, body = request.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        method, path, _ = lines[0].split(b" ", 2)
        fields = [(b":method", method), (b":scheme", b"https"), (b":authority", b"x"), (b":path", path)]
        fields += [(k.strip().lower(), v.strip()) for k, _, v in (x.partition(b":") for x in lines[1:])
                   if k.strip().lower() != b"host"]
        self.sid = self.h2c.get_next_available_stream_id()
        self.h2c.send_headers(self.sid, fields, end_stream=not body)
        off = 0
        while off < len(body):  # within the windows: wait for ferry's SETTINGS or WINDOW_UPDATE when shut
            n = min(len(body) - off, self.h2c.max_outbound_frame_size, self.h2c.local_flow_control_window(self.sid))
            if n <= 0:
                self.sock.sendall(self.h2c.data_to_send())
                self.pending_events = getattr(self, "pending_events", []) + self.h2c.receive_data(self.sock.recv(65536))
                continue
            self.h2c.send_data(self.sid, body[off:off + n], end_stream=off + n == len(body))
            off += n
        self.sock.sendall(self.h2c.data_to_send())

    def read_h2(self):
        import h2.events as ev
        status, body = None, bytearray()
        events, self.pending_events = getattr(self, "pending_events", []), []
        while True:
            if not events:
                data = self.sock.recv(256 * 1024)
                if not data:
                    raise ConnectionError("connection closed by ferry")
                events = self.h2c.receive_data(data)
            batch, events = events, []
            for e in batch:
                if isinstance(e, ev.ResponseReceived) and e.stream_id == self.sid:
                    status = int(dict(e.headers)[b":status"])
                elif isinstance(e, ev.DataReceived):
                    self.h2c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    if e.stream_id == self.sid:
                        body += e.data
                elif isinstance(e, ev.StreamEnded) and e.stream_id == self.sid:
                    self.sock.sendall(self.h2c.data_to_send())
                    return status, bytes(body)
                elif isinstance(e, (ev.StreamReset, ev.ConnectionTerminated)):
                    raise ConnectionError(f"ferry reset the stream or the connection: {e}")
            self.sock.sendall(self.h2c.data_to_send())

    def _fill(self):
        chunk = self.sock.recv(256 * 1024)
        if not chunk:
            raise ConnectionError("connection closed by ferry")
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                return self._take(i + 2)[:-2]
            self._fill()

    def read_response(self):
        if Conn.h2:
            return self.read_h2()
        status_line = self._line()
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ValueError(f"bad status line {status_line[:80]!r}")
        status = int(parts[1])
        headers = {}
        while True:
            line = self._line()
            if not line:
                break
            k, _, v = line.partition(b":")
            headers[k.strip().lower()] = v.strip()
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            body = bytearray()
            while True:
                size = int(self._line().split(b";", 1)[0], 16)
                if size == 0:
                    while self._line():   # trailers
                        pass
                    break
                body += self._take(size)
                self._take(2)
            body = bytes(body)
        else:
            body = self._take(int(headers.get(b"content-length", b"0")))
        if headers.get(b"connection", b"").lower() == b"close":
            raise ConnectionError(f"ferry closes the connection (status {status})")
        return status, body

    def close(self):
        self.sock.close()


def request_all(conns, sc):
    for i in range(0, len(conns), BATCH):
        batch = conns[i:i + BATCH]
        for c in batch:
            c.send(sc.request)
        for c in batch:
            status, body = c.read_response()
            problem = sc.check(status, body)
            if problem:
                raise RuntimeError(f"{sc.name}: unexpected answer: {problem}")


def start_ferry(binary, tmp, static=False):
    conf = os.path.join(tmp, "ferry.yaml")
    extra = ""
    if static:
        pub = os.path.join(tmp, "public")
        os.makedirs(pub, exist_ok=True)
        with open(os.path.join(pub, "file-1m.bin"), "wb") as f:
            f.write(bytes(i % 251 for i in range(MIB)))
        extra = f'  middleware: ["static"]\n  static:\n    dir: "{pub}"\n'
    if Conn.tls is not None:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1"],
                       cwd=tmp, check=True, capture_output=True)
        extra += f'  ssl:\n    address: 127.0.0.1:0\n    cert: "{tmp}/cert.pem"\n    key: "{tmp}/key.pem"\n'
    with open(conf, "w") as f:
        f.write(f"""version: "3"
server:
  command: "php {FIXTURE}"
http:
  address: 127.0.0.1:0
  io_threads: {IO_THREADS}
  pool:
    num_workers: 2
  limits:
    max_header_size: 128KB
  timeouts:
    read_header: 120s
    idle: 300s
""" + extra)
    err = open(os.path.join(tmp, "stderr.log"), "w+b")
    proc = subprocess.Popen([binary, "serve", "-c", conf], stdout=subprocess.PIPE, stderr=err,
                            stdin=subprocess.DEVNULL, cwd=tmp)
    line = proc.stdout.readline().decode()
    if Conn.tls is not None and line.startswith("listening on https://"):
        proc.stdout.readline()  # the plain listener's line; the connections go to the https one
    if not line.startswith("listening on"):
        proc.kill()
        proc.wait()
        err.seek(0)
        sys.exit(f"ferry did not start: {line!r}\n{err.read().decode(errors='replace')[-2000:]}")
    return proc, err, int(line.strip().rsplit(":", 1)[1])


def stop_ferry(proc):
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run(binary, sc, n):
    with tempfile.TemporaryDirectory(prefix="ferry-mem-") as tmp:
        proc, err, port = start_ferry(binary, tmp, sc.static)
        conns = []
        try:
            warm = [Conn(port) for _ in range(WARMUP)]
            conns += warm
            request_all(warm, sc)
            time.sleep(SETTLE)
            base = rss_kib(proc.pid)
            measured = [Conn(port) for _ in range(n)]
            conns += measured
            time.sleep(SETTLE)
            connected = rss_kib(proc.pid)
            request_all(measured, sc)
            time.sleep(SETTLE)
            after = rss_kib(proc.pid)
            if proc.poll() is not None:
                raise RuntimeError(f"ferry exited with {proc.returncode}")
        except Exception as e:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            sys.exit(f"{sc.name}: {e}\nferry stderr (end):\n{tail}")
        finally:
            for c in conns:
                c.close()
            stop_ferry(proc)
            err.close()
    return (connected - base) / n, (after - base) / n, base, after


def main():
    all_sc = scenarios()
    names = [s.name for s in all_sc]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("connections", nargs="?", type=int, default=2000,
                    help="connections for the small scenario (default 2000)")
    ap.add_argument("--large-connections", "-m", type=int, default=2000, metavar="M",
                    help="connections for the large scenarios (default 2000)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "ferry"), metavar="PATH",
                    help="ferry binary (default build/ferry)")
    ap.add_argument("--io-threads", type=int, default=1, metavar="N",
                    help="http.io_threads of the measured server (default 1)")
    ap.add_argument("--only", default=",".join(names),
                    help=f"comma-separated scenarios (default all: {','.join(names)})")
    ap.add_argument("--tls", action="store_true", help="every connection over TLS (http.ssl)")
    ap.add_argument("--h2", action="store_true", help="every connection HTTP/2 over TLS (ALPN h2)")
    args = ap.parse_args()
    if args.h2:
        try:
            import h2  # noqa: F401
        except ImportError:  # a python3 other than Debian's (pyenv) still finds the python3-h2 package
            sys.path.append("/usr/lib/python3/dist-packages")
        Conn.h2 = args.tls = True
    if args.tls:
        Conn.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        Conn.tls.check_hostname = False
        Conn.tls.verify_mode = ssl.CERT_NONE
        if Conn.h2:
            Conn.tls.set_alpn_protocols(["h2"])
    args.bin = os.path.abspath(args.bin)   # ferry runs in a temp dir
    global IO_THREADS
    IO_THREADS = max(1, args.io_threads)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    for s in chosen:
        if s not in names:
            ap.error(f"unknown scenario {s!r} (known: {', '.join(names)})")
    if args.connections < 1 or args.large_connections < 1:
        ap.error("connection counts must be positive")
    if not (os.path.isfile(args.bin) and os.access(args.bin, os.X_OK)):
        sys.exit(f"no ferry binary at {args.bin} (build it, or give --bin PATH)")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(args.connections, args.large_connections) + WARMUP + 256
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            sys.exit(f"RLIMIT_NOFILE hard limit {hard} < {want}: use fewer connections")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    print(f"ferry {args.bin}; {IO_THREADS} event loop(s); fixture tests/php/echo.php, 2 workers; "
          f"{'HTTP/2 over ' if args.h2 else ''}{'TLS 1.3; ' if args.tls else ''}KiB of ferry RSS per connection")
    worst = None
    for sc in all_sc:
        if sc.name not in chosen:
            continue
        n = args.connections if sc.name == "small" else args.large_connections
        t0 = time.monotonic()
        conn_kib, idle_kib, base, after = run(args.bin, sc, n)
        print(f"{sc.name:<9} {sc.what:<38} {n:>5} conns: {conn_kib:7.1f} KiB each connected, "
              f"{idle_kib:7.1f} KiB each idle after it (RSS {base} -> {after} KiB, "
              f"{time.monotonic() - t0:.1f} s)", flush=True)
        if worst is None or idle_kib > worst[0]:
            worst = (idle_kib, sc.name)
    print(f"max: {worst[0]:.1f} KiB per idle connection ({worst[1]})")


if __name__ == "__main__":
    main()
