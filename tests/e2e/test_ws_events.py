"""WebSockets held in the core, beyond one message (docs/protocol.md §9): sends and closes from outside a
connection (RPC, other workers), Server-Sent Events, and the server's lifecycle with sockets open."""

import json
import os
import subprocess
import re
import signal
import time
import unittest

from harness import BIN, wait_until
from harness import Rpc
from wsclient import SseClient
from wscase import WS_CONFIG, WsTestCase


class OutOfBand(WsTestCase):
    # A unix socket in the server's directory: the CLI finds it through the same config file.
    CONFIG = dict(WS_CONFIG, rpc={"listen": "unix://ferry-rpc.sock"})

    def rpc_address(self):
        m = re.search(r"rpc: listening on unix://(\S+)", self.server.stderr())
        self.assertIsNotNone(m, self.server.stderr())
        return "unix://" + os.path.join(self.server.tmp.name, m.group(1))  # relative to the server's cwd

    def test_http_worker_publishes_sends_and_kicks_through_rpc(self):
        self.node.connect(self.url("?topics=news"), name="a")
        self.node.connect(self.url("?topics=news"), name="b")
        status, _, body = self.server.request("GET", "/publish?topic=news&msg=from%20HTTP")
        self.assertEqual((status, body), (200, b"published\n"))
        self.assertEqual(self.node.text("a"), "from HTTP")
        self.assertEqual(self.node.text("b"), "from HTTP")
        status, _, _ = self.server.request("GET", "/publish?topic=news&msg=%00%FF&binary=1")
        self.assertEqual(status, 200)
        e = self.node.message("a")
        self.assertEqual((e["binary"], e["b64"]), (True, "AP8="))
        self.node.message("b")
        ident = self.whoami("a")[0]
        status, _, _ = self.server.request("GET", f"/send?to={ident}&msg=just%20you")
        self.assertEqual(status, 200)
        self.assertEqual(self.node.text("a"), "just you")
        status, _, _ = self.server.request("GET", f"/kick?to={ident}")
        self.assertEqual(status, 200)
        e = self.node.expect("close", "a")
        self.assertEqual((e["code"], e["reason"]), (4003, "kicked over RPC"))

    def test_reset_replaces_the_workers_and_keeps_the_connections(self):
        rpc = Rpc(self.rpc_address())
        self.addCleanup(rpc.close)
        self.assertEqual(rpc.call("resetter.List"), (True, ["http", "websockets"]))
        ok, listed = rpc.call("informer.Workers", "websockets")
        self.assertTrue(ok)
        before = {w["pid"] for w in listed["workers"]}
        self.assertEqual(len(before), 2)
        self.node.connect(self.url(), name="a")
        pid = int(self.whoami("a")[2])
        self.assertIn(pid, before)
        self.assertEqual(rpc.call("resetter.Reset", "websockets"), (True, True))
        ok, listed = rpc.call("informer.Workers", "websockets")
        after = {w["pid"] for w in listed["workers"]}
        self.assertEqual(len(after), 2)
        self.assertFalse(before & after, "every websockets worker was replaced")
        self.assertIn(int(self.whoami("a")[2]), after, "the connection stayed open, a new worker answers it")
        # SIGHUP (like the file watcher) resets both pools
        ok, http_before = rpc.call("informer.Workers", "http")
        self.server.proc.send_signal(signal.SIGHUP)
        def replaced():
            ok, now = rpc.call("informer.Workers", "websockets")
            ok2, http_now = rpc.call("informer.Workers", "http")
            ws_pids = {w["pid"] for w in now["workers"]}
            http_pids = {w["pid"] for w in http_now["workers"]}
            return (len(ws_pids) == 2 and not ws_pids & after and http_pids and
                    not http_pids & {w["pid"] for w in http_before["workers"]})
        self.assertTrue(wait_until(replaced, 20, 0.2))
        self.node.send("after the reset", "a")
        self.assertEqual(self.node.text("a"), "after the reset")
        ok, err = rpc.call("resetter.Reset", "jobs")
        self.assertFalse(ok)
        self.assertIn("Ferry has: http, websockets", err)

    def test_cli_lists_and_resets_the_websockets_workers(self):
        def cli(*args):
            return subprocess.run([BIN, *args, "-c", self.server.config_path], capture_output=True, text=True,
                                  timeout=60, cwd=self.server.tmp.name)
        r = cli("workers", "websockets", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        before = {w["pid"] for w in json.loads(r.stdout)["workers"]}
        self.assertEqual(len(before), 2)
        r = cli("reset", "websockets")
        self.assertEqual((r.returncode, r.stdout), (0, "websockets: workers reset\n"), r.stderr)
        after = {w["pid"] for w in json.loads(cli("workers", "websockets", "--json").stdout)["workers"]}
        self.assertFalse(before & after)
        r = cli("workers", "nope")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Ferry has: http, websockets", r.stderr)

    def test_rpc_errors_name_the_problem(self):
        rpc = Rpc(self.rpc_address())
        self.addCleanup(rpc.close)
        cases = [
            ("websockets.Publish", {"message": "x"}, '"topics" is missing'),
            ("websockets.Publish", {"topics": ["t"]}, '"message" (a string) or "base64" is missing'),
            ("websockets.Publish", {"topics": [], "message": "x"}, "non-empty list"),
            ("websockets.Publish", {"topics": "t", "base64": "!!"}, "not valid base64"),
            ("websockets.Publish", {"topics": "t", "base64": "/w=="}, "not valid UTF-8"),
            ("websockets.Send", {"to": ["nope"], "message": "x"}, "is not a connection id"),
            ("websockets.Close", {"to": "1.1", "code": 1005}, "close code"),
            ("websockets.Publish", [1], "takes a JSON object"),
        ]
        for method, arg, text in cases:
            ok, result = rpc.call(method, arg)
            self.assertFalse(ok, (method, arg))
            self.assertIn(text, result)
        ok, result = rpc.call("websockets.Publish", {"topics": "nobody", "message": "into the void"})
        self.assertEqual((ok, result), (True, True))


class ServerSentEvents(WsTestCase):
    CONFIG = dict(WS_CONFIG, rpc={"listen": "tcp://127.0.0.1:0"},
                  websockets=dict(WS_CONFIG["websockets"], sse_path="/events", sse_history=3,
                                  sse_heartbeat="400ms"))

    def sse(self, target, headers=""):
        c = SseClient(self.server, target, headers)
        self.addCleanup(c.close)
        return c

    def test_php_authorizes_the_topics(self):
        c = self.sse("/events?topic=news&topic=secret&greet=1")
        self.assertEqual(c.status, 200)
        self.assertEqual(c.headers["content-type"], "text/event-stream")
        self.assertEqual(c.headers["transfer-encoding"], "chunked")
        first = c.data_event()
        self.assertEqual((first["id"], first["data"]), (None, "welcome\nto news"), "a send has no id, lines split")
        self.node.connect(self.url(), name="pub")
        self.node.send("pub:secret:for nobody", "pub")
        self.node.send("pub:news:line one\nline two", "pub")
        ev = c.data_event()
        self.assertEqual(ev["data"], "line one\nline two", "the secret topic was not joined")
        self.assertIsInstance(ev["id"], int)
        self.node.send(b"\x01binary", "pub")  # the echo: binary messages never reach an event stream
        self.server.request("GET", "/publish?topic=news&msg=%01&binary=1")
        self.server.request("GET", "/publish?topic=news&msg=from%20RPC")
        self.assertEqual(c.data_event()["data"], "from RPC")

    def test_last_event_id_resumes_from_the_history(self):
        self.node.connect(self.url(), name="pub")
        first = self.sse("/events?topic=feed")
        ids = []
        for i in range(5):
            self.node.send(f"pub:feed:m{i}", "pub")
            ev = first.data_event()
            self.assertEqual(ev["data"], f"m{i}")
            ids.append(ev["id"])
        self.assertEqual(ids, sorted(ids))
        again = self.sse("/events?topic=feed", f"Last-Event-ID: {ids[2]}\r\n")
        self.assertEqual([again.data_event()["data"] for _ in range(2)], ["m3", "m4"])
        # history keeps 3 per topic: from before it, what is kept comes
        old = self.sse("/events?topic=feed", f"Last-Event-ID: {ids[0]}\r\n")
        self.assertEqual([old.data_event()["data"] for _ in range(3)], ["m2", "m3", "m4"])
        self.node.send("pub:feed:live", "pub")
        self.assertEqual(old.data_event()["data"], "live")

    def test_heartbeat_comment(self):
        c = self.sse("/events?topic=quiet")
        t0 = time.monotonic()
        ev = c.event(timeout=5)
        self.assertIsNotNone(ev)
        self.assertEqual(ev["comment"], "")
        self.assertGreaterEqual(time.monotonic() - t0, 0.3)

    def test_refused_by_php_and_wrong_method(self):
        c = self.sse("/events?topic=x&reject=401")
        self.assertEqual((c.status, c.body()), (401, "no stream for you\n"))
        resp, _ = self.raw(b"POST /events HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        self.assertEqual(resp.status, 405)

    def test_close_over_rpc_ends_the_stream(self):
        c = self.sse("/events?topic=t&whoami=1")
        ident = c.data_event()["data"].split(" ")[1]
        self.node.connect(self.url("?topics=closes"), name="watch")
        status, _, _ = self.server.request("GET", f"/kick?to={ident}")
        self.assertEqual(status, 200)
        self.assertIsNone(c.data_event(), "the stream ends with its last chunk")
        self.assertTrue(c.ended)
        self.assertEqual(self.node.text("watch"), f"closed {ident} 4003 kicked over RPC")

    def test_client_leaving_is_a_close_event(self):
        c = self.sse("/events?topic=t&whoami=1")
        ident = c.data_event()["data"].split(" ")[1]
        self.node.connect(self.url("?topics=closes"), name="watch")
        c.sock.close()
        self.assertEqual(self.node.text("watch"), f"closed {ident} 1006 ")


class Lifecycle(WsTestCase):
    def test_stop_says_going_away(self):
        srv = self.start_server(WS_CONFIG, script="ws.php")
        for n in ("a", "b", "c"):
            self.node.connect(self.url(server=srv), name=n)
        srv.terminate()
        for n in ("a", "b", "c"):
            self.assertEqual(self.node.expect("close", n)["code"], 1001)
        srv.stop()

    def test_broker_key_is_warned_about(self):
        srv = self.start_server(dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], broker="default")),
                                script="ws.php")
        self.assertTrue(srv.wait_for_log("broker"))
        self.node.connect(self.url(server=srv))

    def test_many_loops_share_topics(self):
        srv = self.start_server(dict(WS_CONFIG, http={"io_threads": 3, "pool": {"num_workers": 1}}),
                                script="ws.php")
        names = [f"c{i}" for i in range(9)]
        for n in names:
            self.node.connect(self.url("?topics=all", server=srv), name=n)
        loops = set()
        for n in names:
            loops.add(self.whoami(n)[0].split(".")[0])
        self.assertEqual(len(loops), 3, "connections on every loop")
        self.node.send("pub:all:everyone", "c0")
        for n in names:
            self.assertEqual(self.node.text(n), "everyone")


if __name__ == "__main__":
    unittest.main()
