"""WebSockets held in the core (docs/protocol.md §9): the handshake, PHP deciding (open, message, close),
topics, the frame protocol against a real client (Node `ws`) and against malformed frames on a raw socket,
slow receivers, ordering, crashes, shutdown."""

import hashlib
import re
import time
import unittest

from wsclient import RawWs, close_payload, frame
from wscase import WS_CONFIG, WsTestCase


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


class NoFreeWorker(WsTestCase):
    # One websockets worker, and no waiting past 300 ms for it.
    CONFIG = dict(WS_CONFIG, websockets=dict(WS_CONFIG["websockets"],
                                             pool={"num_workers": 1, "allocate_timeout": "300ms"}))

    def test_a_message_with_no_free_worker_closes_with_1013_and_an_upgrade_gets_503(self):
        self.node.connect(self.url(), name="busy")
        self.node.connect(self.url(), name="other")
        self.node.send("sleep:2500", "busy")  # holds the only worker
        time.sleep(0.2)
        self.node.send("hello", "other")
        e = self.node.expect("close", "other", timeout=10)
        self.assertEqual(e["code"], 1013, e)  # RFC 6455 "try again later", not 1011: nothing broke
        c = RawWs(self.server, "/ws")
        self.addCleanup(c.close)
        head = c.handshake()
        self.assertTrue(head.startswith("HTTP/1.1 503 "), head)
        self.assertIn("Retry-After", head)
        self.assertEqual(self.node.text("busy", timeout=10), "slept")
        self.assertTrue(self.server.wait_for_log("the open event failed (503)"))


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


if __name__ == "__main__":
    unittest.main()
