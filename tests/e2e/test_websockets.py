"""WebSockets held in the core (docs/protocol.md §9): the handshake, PHP deciding (open, message, close),
topics, the frame protocol against a real client (Node `ws`) and against malformed frames on a raw socket,
slow receivers, ordering, crashes, shutdown."""

import hashlib
import json
import os
import subprocess
import re
import signal
import struct
import threading
import time
import unittest

from harness import BIN, IO_THREADS, ServerTestCase, wait_until
from test_reload import Rpc
from wsclient import RawWs, NodeWs, SseClient, close_payload, frame

WS_CONFIG = {
    "http": {"pool": {"num_workers": 1}},
    "websockets": {"path": "/ws", "max_message_size": "17MB", "pool": {"num_workers": 2}},
}


class WsTestCase(ServerTestCase):
    SCRIPT = "ws.php"
    CONFIG = WS_CONFIG

    def setUp(self):
        super().setUp()
        self.node = NodeWs()
        self.addCleanup(self.node.close)

    def url(self, query="", server=None, path="/ws"):
        srv = server or self.server
        return f"ws://{srv.address}{path}{query}"

    def raw_ws(self, server=None, path="/ws", extra=""):
        c = RawWs(server or self.server, path)
        self.addCleanup(c.close)
        head = c.handshake(extra)
        self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
        return c

    def whoami(self, name):
        self.node.send("whoami", name)
        return self.node.text(name).split(" ")


class Basics(WsTestCase):
    def test_echo_text_and_binary(self):
        opened = self.node.connect(self.url("?greet=1"))
        self.assertTrue(re.fullmatch(r"hello \d+\.\d+", self.node.text()), "the open actions ran")
        self.assertTrue(opened["headers"].get("x-worker", "").isdigit(), opened["headers"])
        self.node.send("héllo wörld")
        self.assertEqual(self.node.text(), "héllo wörld")
        self.node.send(bytes(range(256)))
        e = self.node.message()
        self.assertTrue(e["binary"])
        self.assertEqual(e["len"], 256)
        self.node.send("")
        self.assertEqual(self.node.text(), "")

    def test_subprotocol_chosen_by_php(self):
        opened = self.node.connect(self.url(), protocols=["v2.other", "chat"])
        self.assertEqual(opened["protocol"], "chat")
        c = RawWs(self.server)
        self.addCleanup(c.close)
        head = c.handshake("Sec-WebSocket-Protocol: other, v3\r\n")
        self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
        self.assertNotIn("Sec-WebSocket-Protocol", head, "PHP chose none of them")

    def test_php_rejects_the_upgrade(self):
        self.node.connect(self.url("?reject=403"), wait=False)
        e = self.node.expect("unexpected")
        self.assertEqual(e["status"], 403)
        self.assertEqual(e["body"], "refused by PHP\n")
        self.assertEqual(e["headers"].get("x-why"), "test")
        self.assertTrue(self.server.wait_for_log("the worker refused the upgrade with 403"))

    def test_data_attached_at_open_and_changed(self):
        self.node.connect(self.url("?user=alice"))
        ident, data, _ = self.whoami("a")
        self.assertEqual(data, "alice")
        self.node.send("data:bob")
        self.assertEqual(self.node.text(), "ok")
        self.assertEqual(self.whoami("a")[1], "bob")

    def test_fragmented_message_is_reassembled(self):
        self.node.connect(self.url())
        self.node.cmd("fragments", parts=["frag", "mented ", "messäge"])
        self.assertEqual(self.node.text(), "fragmented messäge")

    def test_16_mib_messages_both_ways(self):
        self.node.connect(self.url(), maxPayload=32 << 20)
        n = 16 << 20
        self.node.cmd("send", repeat="y", size=n)
        e = self.node.message(timeout=60)
        self.assertEqual(e["len"], n)
        self.assertEqual(e["sha256"], hashlib.sha256(b"y" * n).hexdigest())
        self.node.send(f"big:{n}")
        e = self.node.message(timeout=60)
        self.assertEqual(e["len"], n)
        self.assertEqual(e["sha256"], hashlib.sha256(b"x" * n).hexdigest())

    def test_ping_is_answered_with_pong(self):
        self.node.connect(self.url())
        self.node.cmd("ping", data="are you there")
        self.assertEqual(self.node.expect("pong")["data"], "are you there")

    def test_client_close_code_reaches_php(self):
        self.node.connect(self.url("?topics=closes"), name="watch")
        self.node.connect(self.url(), name="b")
        ident = self.whoami("b")[0]
        self.node.cmd("close", "b", code=4001, reason="bye now")
        e = self.node.expect("close", "b")
        self.assertEqual(e["code"], 4001, "the server echoes the client's code")
        self.assertEqual(self.node.text("watch"), f"closed {ident} 4001 bye now")

    def test_server_close_from_php(self):
        self.node.connect(self.url())
        self.node.send("close:4002:go away")
        e = self.node.expect("close")
        self.assertEqual((e["code"], e["reason"]), (4002, "go away"))

    def test_dropped_connection_is_a_1006_close_event(self):
        self.node.connect(self.url("?topics=closes"), name="watch")
        self.node.connect(self.url(), name="b")
        ident = self.whoami("b")[0]
        self.node.cmd("terminate", "b")
        self.assertEqual(self.node.text("watch"), f"closed {ident} 1006 ")

    def test_plain_http_on_the_path_goes_to_php(self):
        status, _, body = self.server.request("GET", "/ws")
        self.assertEqual((status, body), (200, b"http GET /ws\n"))


class Topics(WsTestCase):
    def test_publish_reaches_every_subscriber_once(self):
        for n in ("a", "b", "c"):
            self.node.connect(self.url("?topics=room,room2" if n != "c" else "?topics=other"), name=n)
        self.node.send("pub:room:hi all", "a")
        self.assertEqual(self.node.text("a"), "hi all")
        self.assertEqual(self.node.text("b"), "hi all")
        self.node.send("pubx:room:not to me", "a")
        self.assertEqual(self.node.text("b"), "not to me")
        # a is in room and room2: a publish to both reaches it once
        self.node.send("pub:room:once", "b")
        self.assertEqual(self.node.text("a"), "once")
        self.assertEqual(self.node.text("b"), "once")
        left = [e for e in self.node.drain(0.5) if e["ev"] == "message"]
        self.assertEqual(left, [], "c is in neither topic; nobody got a message twice")

    def test_join_and_leave(self):
        self.node.connect(self.url(), name="a")
        self.node.connect(self.url(), name="b")
        self.node.send("join:news", "a")
        self.assertEqual(self.node.text("a"), "joined news")
        self.node.send("pub:news:first", "b")
        self.assertEqual(self.node.text("a"), "first")
        self.node.send("leave:news", "a")
        self.assertEqual(self.node.text("a"), "left news")
        self.node.send("pub:news:second", "b")
        self.node.send("whoami", "b")
        self.node.text("b")
        self.assertEqual([e for e in self.node.drain(0.3) if e["ev"] == "message"], [])

    def test_an_empty_recipient_list_is_nobody(self):
        self.node.connect(self.url())
        self.node.send("tonobody")
        self.assertEqual(self.node.text(), "after", "neither the send nor the close went to the sender")
        self.node.send("still open")
        self.assertEqual(self.node.text(), "still open")

    def test_send_to_and_close_another_connection(self):
        self.node.connect(self.url(), name="a")
        self.node.connect(self.url(), name="b")
        ident = self.whoami("a")[0]
        self.node.send(f"to:{ident}:psst", "b")
        self.assertEqual(self.node.text("a"), "psst")
        self.node.send(f"kick:{ident}", "b")
        e = self.node.expect("close", "a")
        self.assertEqual((e["code"], e["reason"]), (4000, "kicked"))

class Ordering(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], pool={"num_workers": 4}))

    def test_events_of_one_connection_stay_in_order_across_4_workers(self):
        n = 200
        names = [f"c{i}" for i in range(6)]
        for name in names:
            self.node.connect(self.url(), name=name)
        for i in range(n):
            for name in names:
                self.node.send(f"seq:{i}" if i % 50 else "whoami", name)
        pids = set()
        for name in names:
            got = [self.node.text(name, timeout=30) for _ in range(n)]
            for i in range(0, n, 50):
                pids.add(got[i].split(" ")[2])
            self.assertEqual([g for k, g in enumerate(got) if k % 50], [f"seq:{i}" for i in range(n) if i % 50])
        self.assertGreaterEqual(len(pids), 2, "the connections' events ran on several workers")


class Handshake(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], allowed_origin="https://*.example.com"))

    def upgrade(self, extra, method="GET", version="HTTP/1.1", key="dGhlIHNhbXBsZSBub25jZQ==", ws_version="13",
                body=""):
        req = f"{method} /ws {version}\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        if key is not None:
            req += f"Sec-WebSocket-Key: {key}\r\n"
        if ws_version is not None:
            req += f"Sec-WebSocket-Version: {ws_version}\r\n"
        resp, _ = self.raw((req + extra + "\r\n" + body).encode())
        return resp

    def test_accept_key_of_the_rfc_example(self):
        c = RawWs(self.server)
        self.addCleanup(c.close)
        head = c.handshake("Origin: https://app.example.com\r\n")
        self.assertIn("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n", head)
        self.assertIn("\r\nUpgrade: websocket\r\n", head)

    def test_bad_handshakes(self):
        self.assertEqual(self.upgrade("", ws_version="8").status, 426)
        r = self.upgrade("", ws_version=None)
        self.assertEqual(r.status, 426)
        self.assertEqual(r.header("Sec-WebSocket-Version"), "13")
        self.assertEqual(self.upgrade("", key="short").status, 400)
        self.assertEqual(self.upgrade("", key=None).status, 400)
        self.assertEqual(self.upgrade("", method="POST").status, 405)
        self.assertEqual(self.upgrade("Content-Length: 3\r\n", body="abc").status, 400)

    def test_origin_pattern(self):
        self.assertEqual(self.upgrade("Origin: https://evil.com\r\n").status, 403)
        self.assertTrue(self.server.wait_for_log("origin not allowed"))
        self.node.connect(self.url(), headers={"Origin": "https://chat.example.com"})
        self.node.connect(self.url(), name="b", headers={"Origin": "https://evil.example.org"}, wait=False)
        self.assertEqual(self.node.expect("unexpected", "b")["status"], 403)


class Malformed(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], max_message_size="64KB"))

    def closes_with(self, data, code):
        c = self.raw_ws()
        c.send(data)
        got, _ = c.read_close()
        self.assertEqual(got, code, f"for {data[:16]!r}")
        self.assertTrue(c.at_eof(), "the server closes the TCP connection after its close frame")

    def test_protocol_errors_close_with_1002(self):
        self.closes_with(frame(1, b"hi", mask=False), 1002)  # unmasked
        self.closes_with(frame(1, b"hi", rsv=4), 1002)  # RSV1 without an extension
        for op in (3, 7, 11, 15):
            self.closes_with(frame(op, b"x"), 1002)
        self.closes_with(frame(9, b"p" * 126), 1002)  # control frame over 125 bytes
        self.closes_with(frame(9, b"p", fin=False), 1002)  # fragmented control frame
        self.closes_with(frame(0, b"x"), 1002)  # continuation with nothing to continue
        self.closes_with(frame(1, b"a", fin=False) + frame(1, b"b"), 1002)  # new message inside a message
        self.closes_with(frame(8, close_payload(999)), 1002)
        self.closes_with(frame(8, b"\x03"), 1002)  # a one-byte close payload
        self.assertTrue(self.server.wait_for_log("closing with 1002"))

    def test_bad_utf8_closes_with_1007(self):
        self.closes_with(frame(1, b"ok \xc0\x80"), 1007)
        self.closes_with(frame(1, b"\xe2\x82", fin=False) + frame(0, b"A"), 1007)  # broken across fragments
        self.closes_with(frame(1, b"\xed\xa0\x80"), 1007)  # a surrogate
        self.closes_with(frame(8, close_payload(1000, b"\xff")), 1007)

    def test_split_utf8_across_fragments_is_valid(self):
        c = self.raw_ws()
        c.send(frame(1, b"\xe2\x82", fin=False) + frame(0, b"\xac euro"))
        op, payload, fin = c.read_frame()
        self.assertEqual((op, payload, fin), (1, "€ euro".encode(), True))

    def test_too_big_closes_with_1009(self):
        c = self.raw_ws()
        c.send(frame(2, b"z" * 70000))
        self.assertEqual(c.read_close()[0], 1009)
        # by fragments too
        c = self.raw_ws()
        c.send(frame(2, b"z" * 40000, fin=False) + frame(0, b"z" * 40000))
        self.assertEqual(c.read_close()[0], 1009)

    def test_byte_by_byte_frames(self):
        c = self.raw_ws()
        data = frame(1, b"slow") + frame(9, b"pp") + frame(1, b"loris")
        for b in data:
            c.send(bytes([b]))
            time.sleep(0.002)
        got = [c.read_frame()[:2] for _ in range(3)]
        # the pong comes from the core at once, the echoes from PHP in order
        self.assertIn((10, b"pp"), got)
        self.assertEqual([f for f in got if f[0] == 1], [(1, b"slow"), (1, b"loris")])

    def test_frames_sent_with_the_handshake(self):
        c = RawWs(self.server)
        self.addCleanup(c.close)
        req = (f"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
        c.send(req + frame(1, b"early"))
        while b"\r\n\r\n" not in c.buf:
            c.buf += c.sock.recv(65536)
        head, c.buf = c.buf.split(b"\r\n\r\n", 1)
        self.assertTrue(head.startswith(b"HTTP/1.1 101"))
        self.assertEqual(c.read_frame()[:2], (1, b"early"))

    def test_close_handshake(self):
        c = self.raw_ws()
        c.send(frame(8, close_payload(1000, b"done")))
        self.assertEqual(c.read_close(), (1000, b""))
        self.assertTrue(c.at_eof())
        c = self.raw_ws()
        c.send(frame(8, b""))
        op, payload, _ = c.read_frame()
        self.assertEqual((op, payload), (8, b""), "an empty close is answered with an empty close")


class Timeouts(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], ping_interval="300ms", idle_timeout="1s"))

    def test_silent_client_is_pinged_then_closed(self):
        c = self.raw_ws()
        t0 = time.monotonic()
        op, _, _ = c.read_frame()
        self.assertEqual(op, 9, "a ping after ping_interval")
        self.assertEqual(c.read_close()[0], 1001)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        self.assertTrue(self.server.wait_for_log("nothing received for 1000 ms"))

    def test_client_answering_pings_stays(self):
        self.node.connect(self.url())  # ws answers pings by itself
        time.sleep(2.5)
        self.node.send("still here")
        self.assertEqual(self.node.text(), "still here")


class SlowReceivers(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], max_queue_messages=50,
                                             max_queue_bytes="1MB"))

    def test_stalled_receiver_does_not_delay_the_others(self):
        names = [f"r{i}" for i in range(19)]
        for n in names + ["sender"]:
            self.node.connect(self.url("?topics=feed" if n != "sender" else ""), name=n)
        # The stalled receiver: a small receive window, and it reads nothing while the feed runs.
        stalled = RawWs(self.server, "/ws?topics=feed", rcvbuf=4096)
        self.addCleanup(stalled.close)
        stalled.handshake()
        payload = "p" * 32768
        count = 150  # 4.9 MB: far beyond the stalled one's queue (1 MB) and socket buffers
        t0 = time.monotonic()
        for i in range(count):
            self.node.send(f"pub:feed:{i:05d}{payload}", "sender")
        for n in names:
            got = [self.node.message(n, timeout=30) for _ in range(count)]
            self.assertEqual([e["len"] for e in got], [32773] * count)
        self.assertLess(time.monotonic() - t0, 25)
        self.assertTrue(self.server.wait_for_log("dropping the oldest messages"))
        self.assertEqual(self.server.stderr().count("dropping the oldest messages"), 1, "logged once")
        # The stalled one reads again: it gets what its queue kept, the newest, its connection intact.
        seen = []
        stalled.sock.settimeout(2)
        try:
            while True:
                op, data, _ = stalled.read_frame()
                seen.append(int(data[:5]))
        except (TimeoutError, OSError):
            pass
        self.assertGreater(len(seen), 0)
        self.assertLess(len(seen), count, "some were dropped")
        self.assertEqual(seen, sorted(seen), "what is kept stays in order")
        self.assertEqual(seen[-1], count - 1, "the newest is kept")
        stalled.sock.settimeout(10)
        stalled.send(frame(1, b"still here"))
        self.assertEqual(stalled.read_frame()[:2], (1, b"still here"))


class OverflowClose(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], max_queue_messages=20,
                                             overflow="close"))

    def test_overflow_closes_with_1008(self):
        self.node.connect(self.url("?topics=closes"), name="watch")
        self.node.connect(self.url("?topics=feed"), name="stalled")
        self.node.connect(self.url(), name="sender")
        ident = self.whoami("stalled")[0]
        self.node.cmd("pause", "stalled")
        for i in range(200):
            self.node.send("pub:feed:" + "q" * 32768, "sender")
        self.assertEqual(self.node.text("watch", timeout=20), f"closed {ident} 1008 send queue full")
        self.assertTrue(self.server.wait_for_log("closing with 1008"))


class Flood(WsTestCase):
    def rss_kib(self):
        with open(f"/proc/{self.server.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def test_a_client_faster_than_php_is_not_read_further(self):
        """48 MB of messages that each take PHP 50 ms: the server stops reading this connection (64 events
        queued at most), the client's writes block, the server's memory stays flat, and others are served."""
        c = self.raw_ws()
        before = self.rss_kib()
        msg = frame(1, b"sleep:50" + b"x" * 16384)
        sent = [0]
        done = threading.Event()

        def flood():
            c.sock.settimeout(0.5)
            try:
                for _ in range(3000):
                    c.sock.sendall(msg)
                    sent[0] += len(msg)
            except (OSError, TimeoutError):
                pass
            done.set()

        t = threading.Thread(target=flood, daemon=True)
        t.start()
        done.wait(20)
        self.assertLess(sent[0], 3000 * len(msg), "the server stopped reading: the client could not send it all")
        self.assertLess(self.rss_kib() - before, 16 * 1024, "what the server holds for it stays bounded")
        self.node.connect(self.url(), name="other")
        self.node.send("served", "other")
        self.assertEqual(self.node.text("other", timeout=20), "served")


class OpenQueue(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"],
                                             pool={"num_workers": 1, "max_queue_size": 1}))

    def test_a_full_websockets_queue_refuses_the_upgrade_with_one_retry_after(self):
        self.node.connect(self.url(), name="busy")
        self.node.send("sleep:1500", "busy")
        time.sleep(0.3)
        self.node.connect(self.url(), name="queued", wait=False)
        time.sleep(0.3)
        c = RawWs(self.server)
        self.addCleanup(c.close)
        head = c.handshake()
        self.assertTrue(head.startswith("HTTP/1.1 503 "), head)
        self.assertEqual(head.count("Retry-After:"), 1, head)
        self.assertEqual(self.node.text("busy", timeout=10), "slept")
        self.node.expect("open", "queued", timeout=10)


class Workers(WsTestCase):
    def test_worker_crash_closes_with_1011_and_others_go_on(self):
        self.node.connect(self.url(), name="a")
        self.node.connect(self.url(), name="b")
        self.node.send("crash", "a")
        e = self.node.expect("close", "a", timeout=15)
        self.assertEqual(e["code"], 1011)
        self.node.send("after", "b")
        self.assertEqual(self.node.text("b"), "after")
        self.node.connect(self.url(), name="c")
        self.node.send("new", "c")
        self.assertEqual(self.node.text("c"), "new")

    def test_bad_actions_close_with_1011(self):
        self.node.connect(self.url())
        self.node.send("bad")
        self.assertEqual(self.node.expect("close")["code"], 1011)
        self.assertTrue(self.server.wait_for_log("answered the message event with bad actions"))


class UnencodableActions(WsTestCase):
    """A client's text that makes the PHP handler reply with invalid UTF-8 (half a character) must not end the
    worker: the action is dropped and logged, the rest of the reply goes on, the same worker serves on."""
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], pool={"num_workers": 1}))

    def test_half_a_character_drops_the_action_not_the_worker(self):
        self.node.connect(self.url())
        _, _, pid = self.whoami("a")
        self.node.send("cut:\u00e9t\u00e9")  # "été": its first byte is half of "é"
        self.assertEqual(self.node.text(), "after the cut")
        ident, data, pid_after = self.whoami("a")
        self.assertEqual((data, pid_after), ("", pid), "no data attached, the same worker")
        self.assertTrue(self.server.wait_for_log('dropped WebSocket action #1 ("data")'), self.server.stderr())
        self.assertTrue(self.server.wait_for_log('#2 ("send"): its text message is not valid UTF-8'))


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


class Relay(WsTestCase):
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"], relay=True))

    def test_messages_go_to_the_topics_without_php(self):
        for n in ("sender", "r1", "r2"):
            self.node.connect(self.url("?topics=video"), name=n)
        self.node.connect(self.url("?topics=other"), name="outsider")
        self.node.send("frame 1", "sender")
        self.node.send(b"\x00\x01binary frame", "sender")
        for n in ("r1", "r2"):
            self.assertEqual(self.node.text(n), "frame 1")
            self.assertEqual(self.node.message(n)["b64"], "AAFiaW5hcnkgZnJhbWU=")
        got = [e for e in self.node.drain(0.4) if e["ev"] == "message"]
        self.assertEqual(got, [], "not back to the sender, not to other topics, PHP not asked (no echo)")


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
