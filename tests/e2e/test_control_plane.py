"""The control plane stays reachable (issue 41): idle sockets held on rpc.listen, status.address and
metrics.address do not lock callers out (a silent connection is closed after first_byte_timeout; when the
64 slots are taken, the oldest idle connection is closed for the new caller), and the RPC frame limit
follows websockets.max_message_size (a 2 MiB publish goes through; an over-size frame gets an error that
says so)."""

import json
import re
import socket
import subprocess
import time

from harness import BIN, HOST, Rpc, ServerTestCase, metrics_address, probe_get, wait_until
from wsclient import RawWs

IDLE = 70  # more than a listener's 64 slots


def listening(srv, pattern):
    found = []

    def look():
        m = re.search(pattern, srv.stderr())
        if m:
            found.append(m.group(1))
        return bool(m)
    assert wait_until(look, 5.0), srv.stderr()
    return found[0]


def addr_of(hostport):
    host, port = hostport.rsplit(":", 1)
    return host, int(port)


def closed_total(srv, listener, reason):
    status, _, body = probe_get(metrics_address(srv), "/metrics")
    assert status == 200, body
    m = re.search(r'^ferry_control_connections_closed_total\{listener="%s",reason="%s"\} (\S+)$'
                  % (listener, reason), body, re.M)
    assert m, body
    return float(m.group(1))


CONFIG = {
    "http": {"pool": {"num_workers": 1}},
    "websockets": {"path": "/ws", "pool": {"num_workers": 1}},
    "rpc": {"listen": "tcp://127.0.0.1:0"},
    "status": {"address": f"{HOST}:0"},
    "metrics": {"address": f"{HOST}:0"},
}


class IdleSockets(ServerTestCase):
    """70 idle connections on each control listener; every caller is still answered, at once."""
    SCRIPT = "ws.php"
    CONFIG = CONFIG

    def hold(self, addr, n=IDLE):
        socks = []
        for _ in range(n):
            s = socket.create_connection(addr, timeout=10)
            socks.append(s)
            self.addCleanup(s.close)
        time.sleep(0.2)  # accepted by the server
        return socks

    def test_callers_are_answered_while_idle_sockets_are_held(self):
        srv = self.server
        rpc = listening(srv, r"rpc: listening on (tcp://127\.0\.0\.1:\d+)")
        status = addr_of(listening(srv, r"status: health checks on http://(\S+)/health"))
        metrics = metrics_address(srv)
        idle = self.hold(addr_of(rpc[len("tcp://"):])) + self.hold(status) + self.hold(metrics)

        t0 = time.monotonic()
        self.assertEqual(probe_get(status, "/health")[0], 200)
        self.assertEqual(probe_get(metrics, "/metrics")[0], 200)
        r = subprocess.run([BIN, "workers", "-c", srv.config_path, "-o", f"rpc.listen={rpc}"],
                           capture_output=True, text=True, timeout=20, cwd=srv.tmp.name)  # port 0 resolved
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("PID", r.stdout.upper(), r.stdout)
        ws = RawWs(srv, "/ws?topics=news")
        self.addCleanup(ws.close)
        self.assertIn(" 101 ", ws.handshake())
        # the application's Rpc::publish (an HTTP worker, Ferry\Worker\Rpc over rpc.listen)
        status_code, _, body = srv.request("GET", "/publish?topic=news&msg=through")
        self.assertEqual((status_code, body), (200, b"published\n"))
        self.assertEqual(ws.read_frame()[:2], (1, b"through"))
        self.assertLess(time.monotonic() - t0, 4.0, "answered at once, not after the first-byte timeout")

        # The idle ones were closed to make room, counted and logged.
        self.assertGreaterEqual(closed_total(srv, "rpc", "idle"), 2)
        self.assertGreaterEqual(closed_total(srv, "status", "idle"), 1)
        self.assertGreaterEqual(closed_total(srv, "metrics", "idle"), 1)
        self.assertIn("closed the oldest idle one", srv.stderr())
        for s in idle:
            s.close()

    def test_silent_connection_closed_after_first_byte_timeout(self):
        srv = self.start_server(dict(CONFIG, rpc={"listen": "tcp://127.0.0.1:0", "first_byte_timeout": "300ms"},
                                     status={"address": f"{HOST}:0", "first_byte_timeout": "300ms"}),
                                script="ws.php")
        rpc = listening(srv, r"rpc: listening on (tcp://127\.0\.0\.1:\d+)")
        status = addr_of(listening(srv, r"status: health checks on http://(\S+)/health"))
        for addr in (addr_of(rpc[len("tcp://"):]), status):
            s = socket.create_connection(addr, timeout=5)
            self.addCleanup(s.close)
            t0 = time.monotonic()
            self.assertEqual(s.recv(10), b"")
            self.assertLess(time.monotonic() - t0, 3.0)
        self.assertEqual(closed_total(srv, "rpc", "first_byte_timeout"), 1)
        self.assertEqual(closed_total(srv, "status", "first_byte_timeout"), 1)
        self.assertIn("no byte within rpc.first_byte_timeout", srv.stderr())
        # a caller that talks keeps its connection between calls
        c = Rpc(rpc)
        self.addCleanup(c.close)
        self.assertEqual(c.call("informer.List", True), (True, ["http", "websockets"]))
        time.sleep(0.6)
        self.assertEqual(c.call("informer.List", True), (True, ["http", "websockets"]))


class StopWithConnectionsHeld(ServerTestCase):
    """A stop is cancel and join: connections held open on every listener (RPC idle and mid-frame, status,
    metrics, a keep-alive HTTP connection, a WebSocket) are closed by their owners, and the server exits at
    once without an event loop left holding a task (the harness's stop() asserts no "still had work")."""

    def test_sigterm_closes_what_every_listener_holds(self):
        srv = self.start_server(CONFIG, script="ws.php")
        rpc = addr_of(listening(srv, r"rpc: listening on (tcp://127\.0\.0\.1:\d+)")[len("tcp://"):])
        status = addr_of(listening(srv, r"status: health checks on http://(\S+)/health"))
        held = [socket.create_connection(a, timeout=10) for a in (rpc, rpc, status, metrics_address(srv))]
        held[1].sendall(b"\x13")  # a Goridge frame's first byte, the rest never comes
        keep_alive = srv.socket(10)
        keep_alive.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(keep_alive.recv(65536).startswith(b"HTTP/1.1 200"))
        ws = RawWs(srv, "/ws?topics=news")
        self.assertIn(" 101 ", ws.handshake())
        held.append(keep_alive)
        for s in held:
            self.addCleanup(s.close)
        self.addCleanup(ws.close)
        time.sleep(0.2)  # accepted by the server
        t0 = time.monotonic()
        srv.stop(timeout=10)  # asserts exit code 0, no worker left, every loop's tasks ended
        self.assertLess(time.monotonic() - t0, 3.0, srv.stderr())
        for s in held:
            s.settimeout(5)
            self.assertEqual(s.recv(65536)[:0], b"")  # closed (EOF, or what was left before it)


class LargeRpcFrames(ServerTestCase):
    """The RPC frame limit follows websockets.max_message_size (4 MiB here: 8 MiB + 64 KiB)."""
    SCRIPT = "ws.php"
    CONFIG = dict(CONFIG, websockets={"path": "/ws", "max_message_size": "4MB", "pool": {"num_workers": 1}})

    def test_a_2_mib_publish_reaches_a_subscriber(self):
        srv = self.server
        ws = RawWs(srv, "/ws?topics=big")
        self.addCleanup(ws.close)
        self.assertIn(" 101 ", ws.handshake())
        c = Rpc(listening(srv, r"rpc: listening on (tcp://127\.0\.0\.1:\d+)"))
        self.addCleanup(c.close)
        message = "x" * (2 << 20)
        self.assertEqual(c.call("websockets.Publish", {"topics": ["big"], "message": message}), (True, True))
        op, payload, fin = ws.read_frame()
        self.assertEqual((op, len(payload), fin), (1, 2 << 20, True))
        self.assertEqual(payload, message.encode())
        self.assertNotIn("not an RPC frame", srv.stderr())

    def test_an_over_size_frame_gets_a_clear_error(self):
        srv = self.server
        c = Rpc(listening(srv, r"rpc: listening on (tcp://127\.0\.0\.1:\d+)"))
        self.addCleanup(c.close)
        body = json.dumps({"topics": ["big"], "message": "y" * (9 << 20)}).encode()
        ok, error = c.call("websockets.Publish", raw_body=body)
        self.assertFalse(ok)
        size = len("websockets.Publish") + len(body)
        limit = 2 * (4 << 20) + (64 << 10)
        self.assertIn(f"RPC frame of {size} bytes is over the {limit}-byte limit", error)
        self.assertIn("websockets.max_message_size", error)
        # the connection goes on after the frame
        self.assertEqual(c.call("informer.List", True), (True, ["http", "websockets"]))
        self.assertIn(f"RPC frame of {size} bytes is over the {limit}-byte limit", srv.stderr())
        self.assertNotIn("not an RPC frame", srv.stderr())
