"""WebSockets held in the core, delivery under pressure (docs/protocol.md §9): idle timeouts, slow receivers and
their queues (drop or close), floods, messages queued while PHP decides, relay mode."""

import threading
import time
import unittest

from harness import rss_kib
from wsclient import RawWs, frame
from wscase import WS_CONFIG, WsTestCase


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
    def test_a_client_faster_than_php_is_not_read_further(self):
        """48 MB of messages that each take PHP 50 ms: the server stops reading this connection (64 events
        queued at most), the client's writes block, the server's memory stays flat, and others are served."""
        c = self.raw_ws()
        before = rss_kib(self.server.proc.pid)
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
        self.assertLess(rss_kib(self.server.proc.pid) - before, 16 * 1024, "what the server holds for it stays bounded")
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


if __name__ == "__main__":
    unittest.main()
