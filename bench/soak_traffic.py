"""The traffic of bench/soak.sh (driven by bench/soak_mixed.py): paced HTTP clients over a mix of routes
(keep-alive or one connection per request), a crashing route hit now and then, WebSocket chat clients that
come and go, one stalled WebSocket receiver that never reads (fed by a bulk publisher), and server-sent
events readers. Every client is
a thread that ends when `stop` is set; what they see goes into a Stats (per-minute buckets)."""
import http.client
import os
import random
import socket
import struct
import sys
import threading
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
from wsclient import RawWs, SseClient, close_payload, frame  # noqa: E402  (the e2e tests' raw clients)

IO_ERRORS = (OSError, http.client.HTTPException, EOFError, AssertionError, ValueError)


class Stats:
    """Counters of the current minute; rotate() hands them over and starts the next."""

    def __init__(self):
        self.lock = threading.Lock()
        self.cur = self._fresh()

    @staticmethod
    def _fresh():
        return {"lat": [], "ok": 0, "non2xx": {}, "wrong": 0, "errors": {}, "crash502": 0, "ws_lat": [],
                "ws_recv": 0, "ws_sent": 0, "ws_conns": 0, "ws_lost": 0, "sse_events": 0, "sse_conns": 0,
                "sse_lost": 0, "stalled_conns": 0, "stalled_sent": 0, "bulk_sent": 0}

    def add(self, key, n=1):
        with self.lock:
            self.cur[key] += n

    def count(self, key, what):
        with self.lock:
            self.cur[key][what] = self.cur[key].get(what, 0) + 1

    def latency(self, key, seconds):
        with self.lock:
            self.cur[key].append(seconds)

    def rotate(self):
        with self.lock:
            out, self.cur = self.cur, self._fresh()
        return out


def error_name(e):
    return type(e).__name__


# ---------------------------------------------------------------- HTTP

LEAK_SHARE = 0.1  # of the paced requests
CHAT_PAD = 1000  # bytes of padding per chat message


def http_routes(files, leak_kb):
    """(weight, name, method, target, body, content type, check of the answer body) for the paced clients;
    `files` maps the static files' URL paths to their sizes; /leak keeps `leak_kb` KB in its worker."""
    fields = "&".join(f"field{i}=value{i}" for i in range(30))
    up = os.urandom(64 << 10)
    boundary = "soakboundary7MA4YWxkTrZu0gW"
    multipart = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nsoak\r\n"
                 f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
                 f"Content-Type: application/octet-stream\r\n\r\n").encode() + up + f"\r\n--{boundary}--\r\n".encode()
    raw = b"r" * (200 << 10)
    routes = [  # weights add up to 100
        (42, "hello", "GET", "/", None, None, lambda b: b == b"Hello, World!"),
        (15, "form", "POST", "/form", fields.encode(), "application/x-www-form-urlencoded",
         lambda b: b == b"30 value20"),
        (8, "upload", "POST", "/upload", multipart, f"multipart/form-data; boundary={boundary}",
         lambda b: b == f"0 {len(up)} {len(up)}".encode()),
        (5, "body", "POST", "/body", raw, "application/octet-stream", lambda b: b == str(len(raw)).encode()),
        (LEAK_SHARE * 100, "leak", "GET", f"/leak?kb={leak_kb}", None, None, lambda b: b.startswith(b"leaked ")),
    ]
    for path, size in files.items():
        routes.append((20 / len(files), "static", "GET", path, None, None, lambda b, n=size: len(b) == n))
    return routes


def request(conn, method, target, body, ctype, close):
    headers = {}
    if ctype:
        headers["Content-Type"] = ctype
    if close:
        headers["Connection"] = "close"
    conn.request(method, target, body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def http_client(port, stats, stop, period, keepalive, routes, seed):
    """Paced requests (one every `period` seconds) over the weighted `routes`, on one keep-alive connection
    (reopened after an error) or on a new connection each time."""
    rnd = random.Random(seed)
    weights = [r[0] for r in routes]
    conn = None
    nxt = time.monotonic() + rnd.random() * period
    while not stop.is_set():
        delay = nxt - time.monotonic()
        if delay > 0:
            stop.wait(delay)
            continue
        nxt = max(nxt + period, time.monotonic() - period)  # behind by more than one period: do not burst
        _, name, method, target, body, ctype, check = rnd.choices(routes, weights)[0]
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t0 = time.monotonic()
        try:
            status, data = request(conn, method, target, body, ctype, not keepalive)
        except IO_ERRORS as e:
            stats.count("errors", f"{name}: {error_name(e)}")
            conn.close()
            conn = None
            continue
        stats.latency("lat", time.monotonic() - t0)
        if status // 100 != 2:
            stats.count("non2xx", f"{name} {status}")
        elif not check(data):
            stats.add("wrong")
        else:
            stats.add("ok")
        if not keepalive:
            conn.close()
            conn = None
    if conn is not None:
        conn.close()


def crash_client(port, stats, stop, every):
    """GET /crash (the worker exits mid-request: 502 expected) every `every` seconds on a new connection."""
    while not stop.wait(every):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            status, _ = request(conn, "GET", "/crash", None, None, True)
            if status == 502:
                stats.add("crash502")
            else:
                stats.count("non2xx", f"crash {status}")
        except IO_ERRORS as e:
            stats.count("errors", f"crash: {error_name(e)}")
        finally:
            conn.close()


def saturate(port, seconds, threads):
    """Requests per second of `threads` keep-alive clients sending GET / as fast as they can."""
    stop = threading.Event()
    done = [0] * threads

    def run(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while not stop.is_set():
            try:
                status, _ = request(conn, "GET", "/", None, None, False)
            except IO_ERRORS:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                continue
            done[i] += status == 200
        conn.close()

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    return sum(done) / (time.monotonic() - t0)


# ---------------------------------------------------------------- WebSockets and SSE

def server_of(port):
    return types.SimpleNamespace(port=port, address=f"127.0.0.1:{port}")


class Refused(Exception):
    """A WebSocket handshake or an event stream answered with this status instead of 101 or 200."""


def ws_open(port, target, rcvbuf=None):
    ws = RawWs(server_of(port), target, timeout=10.0, rcvbuf=rcvbuf)
    head = ws.handshake()
    if not head.startswith("HTTP/1.1 101"):
        ws.close()
        raise Refused(head.split(" ")[1] if " " in head else "?")
    return ws


def sse_open(port, last):
    sse = SseClient(server_of(port), "/events?topic=chat",
                    headers=f"Last-Event-ID: {last}\r\n" if last is not None else "")
    if sse.status != 200:
        sse.close()
        raise Refused(str(sse.status))
    return sse


def opened(stats, stop, what, opener):
    """opener()'s client, counted in `<what>_conns`; None after counting its failure and waiting 1 s."""
    try:
        client = opener()
    except Refused as e:
        stats.count("non2xx", f"{what} {e}")
    except IO_ERRORS as e:
        stats.count("errors", f"{what} open: {error_name(e)}")
    else:
        stats.add(f"{what}_conns")
        return client
    stop.wait(1)
    return None


def text(data):
    return frame(0x1, data.encode())


def chat_client(port, stats, stop, cid, period, life, topic="chat", size=CHAT_PAD):
    """Joins `topic` and publishes "<cid> <seq> <time> <padding of `size` bytes>" to it every `period` s, reads
    everything (its own messages give the delivery latency), answers pings; leaves with a close after about
    `life` s and comes back. topic "bulk": publishes there without joining (only the stalled receiver reads)."""
    rnd = random.Random(cid)
    seq = 0
    pad = "p" * size
    target = "/ws" if topic == "bulk" else f"/ws?topics={topic}"
    sent = "bulk_sent" if topic == "bulk" else "ws_sent"
    while not stop.is_set():
        ws = opened(stats, stop, "ws", lambda: ws_open(port, target))
        if ws is None:
            continue
        end = time.monotonic() + life * (0.5 + rnd.random())
        nxt = time.monotonic() + rnd.random() * period
        try:
            while not stop.is_set() and time.monotonic() < end:
                now = time.monotonic()
                if now >= nxt:
                    seq += 1
                    ws.send(text(f"pub:{topic}:{cid} {seq} {time.monotonic():.6f} {pad}"))
                    stats.add(sent)
                    nxt = now + period
                ws.sock.settimeout(max(0.01, nxt - time.monotonic()))
                try:
                    op, payload, _ = ws.read_frame()
                except (socket.timeout, TimeoutError):
                    continue
                if op == 0x9:
                    ws.send(frame(0xA, payload))
                elif op == 0x8:
                    raise EOFError(f"closed by the server: {struct.unpack('!H', payload[:2])[0] if payload else ''}")
                elif op == 0x1:
                    stats.add("ws_recv")
                    parts = payload.decode(errors="replace").split(" ")
                    if len(parts) == 4 and parts[0] == str(cid):
                        stats.latency("ws_lat", time.monotonic() - float(parts[2]))
            ws.send(frame(0x8, close_payload(1000, b"bye")))
            ws.sock.settimeout(5)
            ws.read_close()
        except IO_ERRORS as e:
            stats.add("ws_lost")
            stats.count("errors", f"ws: {error_name(e)}")
        finally:
            ws.close()


def stalled_receiver(port, stats, stop, period):
    """A WebSocket client that joins "chat" and "bulk" and never reads (a 4 KiB receive buffer): it only
    publishes to a topic nobody reads, every `period` s, so the server keeps it (no idle close) while the
    kernel's buffers, then its send queue in the server (websockets.max_queue_bytes) fill. Reconnects when
    the server closes it."""
    while not stop.is_set():
        ws = opened(stats, stop, "stalled", lambda: ws_open(port, "/ws?topics=chat,bulk", rcvbuf=4096))
        if ws is None:
            continue
        try:
            while not stop.wait(period):
                ws.send(text("pub:nobody:still here"))
                stats.add("stalled_sent")
        except IO_ERRORS:
            pass  # closed by the server (counted by the reconnection)
        finally:
            ws.close()


def sse_reader(port, stats, stop, life):
    """Reads /events?topic=chat for about `life` s, then reconnects with Last-Event-ID."""
    rnd = random.Random(port)
    last = None
    while not stop.is_set():
        sse = opened(stats, stop, "sse", lambda: sse_open(port, last))
        if sse is None:
            continue
        end = time.monotonic() + life * (0.5 + rnd.random())
        try:
            while not stop.is_set() and time.monotonic() < end:
                try:
                    ev = sse.event(timeout=1.0)
                except (socket.timeout, TimeoutError):
                    continue
                if ev is None:
                    raise EOFError("the stream ended")
                if ev["data"] is not None:
                    stats.add("sse_events")
                    if ev["id"] is not None:
                        last = ev["id"]
        except IO_ERRORS as e:
            stats.add("sse_lost")
            stats.count("errors", f"sse: {error_name(e)}")
        finally:
            sse.close()
