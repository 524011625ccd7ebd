"""websockets.broker: redis (docs/cluster.md): topics shared by several Ferry nodes through a real
redis-server started here on a free port: messages cross nodes in order and once, 1000 receivers over two
nodes, Redis killed and started again (local delivery unaffected, cross-node delivery back, nothing
duplicated), a peer that is not Redis, a password."""

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import unittest

from harness import HOST, Rpc, ServerTestCase, deep_merge, metric, probe_get, wait_until
from redis_server import RedisServer, free_port
from wsclient import NODE_DIR, NodeWs, SseClient

WS = {"path": "/ws", "sse_path": "/events", "sse_history": 4, "pool": {"num_workers": 2}}


def node_config(redis_address, **broker):
    return {
        "http": {"pool": {"num_workers": 1}},
        "websockets": dict(WS, broker=dict({"driver": "redis", "addrs": [redis_address]}, **broker)),
        "metrics": {"address": f"{HOST}:0"},
        "rpc": {"listen": "tcp://127.0.0.1:0"},
        "status": {"address": f"{HOST}:0"},
    }


def status_address(srv):
    m = re.search(r"status: health checks on http://(\S+)/health", srv.stderr())
    assert m, srv.stderr()
    host, port = m.group(1).rsplit(":", 1)
    return host, int(port)


def ready(srv, query=""):
    status, _, body = probe_get(status_address(srv), "/ready" + query)
    return status, body


def fanout(urls, per_url, expect, timeout_ms=30000):
    """tests/e2e/node/fanout.js: returns (process, its ready event); its summary comes with finish()."""
    p = subprocess.Popen(["node", "fanout.js", json.dumps(dict(urls=urls, per_url=per_url, expect=expect,
                                                                timeout_ms=timeout_ms))],
                         cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert line, p.stderr.read()
    return p, json.loads(line)


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


class BrokerCase(ServerTestCase):
    SCRIPT = "ws.php"

    def setUp(self):
        super().setUp()
        self.redis = RedisServer().start()
        self.addCleanup(self.redis.close)
        self.ws = NodeWs()
        self.addCleanup(self.ws.close)

    def node(self, name, **broker):
        srv = self.start_server(node_config(self.redis.address, node=name, **broker), script="ws.php")
        self.assertTrue(srv.wait_for_log(f'node "{name}" connected to redis'), srv.stderr())
        return srv

    @staticmethod
    def url(srv, query=""):
        return f"ws://{srv.address}/ws{query}"

    def subscribed(self, srv, n):
        """Waits until the node is subscribed to n topics (its SUBSCRIBE reached Redis)."""
        self.assertTrue(wait_until(lambda: metric(srv, "ferry_broker_subscriptions") == n, 5),
                        metric(srv, "ferry_broker_subscriptions"))


class AcrossNodes(BrokerCase):
    def test_messages_cross_nodes_in_order_and_once(self):
        a, b = self.node("a"), self.node("b")
        self.ws.connect(self.url(a, "?topics=feed"), "on_a")
        self.ws.connect(self.url(b, "?topics=feed"), "on_b")
        self.ws.connect(self.url(b), "sender")
        self.subscribed(a, 1)
        self.subscribed(b, 1)
        for i in range(200):
            self.ws.send(f"pub:feed:{i}", "sender")
        for name in ("on_a", "on_b"):
            got = [self.ws.text(name) for _ in range(200)]
            self.assertEqual(got, [str(i) for i in range(200)], name)
        # Nothing more: the publishing node did not deliver its own copy again, A had one copy each.
        self.ws.send("pub:feed:end", "sender")
        self.assertEqual(self.ws.text("on_a"), "end")
        self.assertEqual(self.ws.text("on_b"), "end")
        self.assertEqual(metric(b, "ferry_broker_messages_total", direction="published"), 201)
        self.assertEqual(metric(a, "ferry_broker_messages_total", direction="received"), 201)
        self.assertEqual(metric(b, "ferry_broker_messages_total", direction="received"), 0)

    def test_a_message_to_several_topics_arrives_once(self):
        a, b = self.node("a"), self.node("b")
        self.ws.connect(self.url(a, "?topics=x,y"), "both")
        self.ws.connect(self.url(a, "?topics=y"), "only_y")
        self.subscribed(a, 2)
        status, _, body = b.request("GET", "/publish?topic=x,y&msg=hello")
        self.assertEqual(status, 200, body)
        status, _, body = b.request("GET", "/publish?topic=y&msg=second")
        self.assertEqual(self.ws.text("both"), "hello")
        self.assertEqual(self.ws.text("both"), "second", "the first message once, then the second")
        self.assertEqual(self.ws.text("only_y"), "hello")
        self.assertEqual(self.ws.text("only_y"), "second")

    def test_unsubscribed_when_the_last_connection_leaves(self):
        a, b = self.node("a"), self.node("b")
        self.ws.connect(self.url(a, "?topics=t1,t2"), "c1")
        self.ws.connect(self.url(a, "?topics=t2"), "c2")
        self.subscribed(a, 2)
        self.ws.send("leave:t1", "c1")
        self.assertEqual(self.ws.text("c1"), "left t1")
        self.subscribed(a, 1)
        self.assertEqual(self.redis.command("PUBSUB", "NUMSUB", "ferry:t:t1")[1], 0)
        self.assertEqual(self.redis.command("PUBSUB", "NUMSUB", "ferry:t:t2")[1], 1)
        self.ws.cmd("close", "c1", code=1000, reason="bye")
        self.ws.cmd("close", "c2", code=1000, reason="bye")
        self.subscribed(a, 0)
        self.assertEqual(self.redis.command("PUBSUB", "NUMSUB", "ferry:t:t2")[1], 0)

    def test_send_and_kick_by_id_across_nodes(self):
        a, b = self.node("a"), self.node("b")
        self.ws.connect(self.url(a, "?user=t"), "target")
        self.ws.send("whoami", "target")
        target_id = self.ws.text("target").split(" ")[0]
        self.assertRegex(target_id, r"^a\.\d+\.\d+$", "the node's name first")
        self.ws.connect(self.url(b), "sender")
        self.ws.send("whoami", "sender")
        self.assertTrue(self.ws.text("sender").startswith("b."))
        self.ws.send(f"to:{target_id}:hello from b", "sender")
        self.assertEqual(self.ws.text("target"), "hello from b")
        status, _, body = b.request("GET", f"/send?to={target_id}&msg=over-rpc")
        self.assertEqual(status, 200, body)
        self.assertEqual(self.ws.text("target"), "over-rpc")
        # An id on node a named by node a itself, and one of a node that does not exist: nothing breaks.
        status, _, _ = a.request("GET", f"/send?to={target_id}&msg=same-node")
        self.assertEqual(self.ws.text("target"), "same-node")
        self.assertEqual(b.request("GET", "/send?to=nowhere.1.1&msg=x")[0], 200)
        # One close action for the sender itself and a connection of the other node: both end.
        self.ws.send("whoami", "sender")
        sender_id = self.ws.text("sender").split(" ")[0]
        self.ws.send(f"kick:{sender_id},{target_id}", "sender")
        closed = self.ws.expect("close", "target")
        self.assertEqual(closed["code"], 4000, closed)
        self.assertEqual(self.ws.expect("close", "sender")["code"], 4000)

    def test_thousand_receivers_over_two_nodes_get_a_burst(self):
        a, b = self.node("a"), self.node("b")
        p, ready_ev = fanout([self.url(a, "?topics=burst"), self.url(b, "?topics=burst")], 500, 100)
        self.addCleanup(p.kill)
        self.assertEqual(ready_ev["opened"], 1000)
        self.subscribed(a, 1)
        self.subscribed(b, 1)
        self.ws.connect(self.url(b), "sender")
        for i in range(100):
            self.ws.send(f"pub:burst:{i}:{int(time.time() * 1000)}", "sender")
        s = finish(p)
        self.assertEqual((s["complete"], s["received"], s["out_of_order"], s["duplicates"]),
                         (1000, 100000, 0, 0), s)


class Relay(BrokerCase):
    def test_relay_mode_publishes_across_nodes(self):
        # The receiver's queue holds all 40 MiB, so each of them must arrive (with the default 4 MB, a client
        # slower than the sender would rightly lose the oldest: that is ws_delivery's subject, not this one).
        relay = {"websockets": dict(WS, relay=True, max_queue_bytes="64MB")}
        a = self.start_server(deep_merge(node_config(self.redis.address, node="a"), relay), script="ws.php")
        b = self.start_server(deep_merge(node_config(self.redis.address, node="b"), relay), script="ws.php")
        for srv, name in ((a, "a"), (b, "b")):
            self.assertTrue(srv.wait_for_log(f'node "{name}" connected to redis'), srv.stderr())
        self.ws.connect(self.url(a, "?topics=room"), "on_a")
        self.ws.connect(self.url(b, "?topics=room"), "on_b")
        self.subscribed(a, 1)
        self.subscribed(b, 1)
        for i in range(20):
            self.ws.send(f"r{i}", "on_b")  # the core publishes it to the sender's topics, not to the sender
        self.assertEqual([self.ws.text("on_a") for _ in range(20)], [f"r{i}" for i in range(20)])
        self.assertEqual(self.ws.drain(0.3), [], "nothing back to the sender, nothing twice")


class EventStreams(BrokerCase):
    def sse(self, srv, target, headers=""):
        c = SseClient(srv, target, headers)
        self.addCleanup(c.close)
        self.assertEqual(c.status, 200)
        return c

    def test_resume_on_the_other_node_from_the_same_ids(self):
        a, b = self.node("a"), self.node("b")
        first = self.sse(a, "/events?topic=news")
        self.subscribed(a, 1)
        for i in range(6):
            a.request("GET", f"/publish?topic=news&msg=m{i}")
        events = [first.data_event() for _ in range(3)]
        self.assertEqual([e["data"] for e in events], ["m0", "m1", "m2"])
        ids = [e["id"] for e in events]
        self.assertEqual(ids, sorted(ids))
        first.close()
        # Node b never had a subscriber to "news": its own history is empty, Redis keeps every node's.
        again = self.sse(b, "/events?topic=news", f"Last-Event-ID: {ids[2]}\r\n")
        resumed = [again.data_event() for _ in range(3)]
        self.assertEqual([e["data"] for e in resumed], ["m3", "m4", "m5"])
        self.assertTrue(all(e["id"] > ids[2] for e in resumed), resumed)
        a.request("GET", "/publish?topic=news&msg=live")
        self.assertEqual(again.data_event()["data"], "live", "then live messages, in order")
        # The history keeps sse_history (4) per topic: from an id before it, the newest 4.
        old = self.sse(b, "/events?topic=news", f"Last-Event-ID: {ids[0]}\r\n")
        self.assertEqual([old.data_event()["data"] for _ in range(4)], ["m3", "m4", "m5", "live"])

    def test_a_resume_reads_no_more_than_a_send_queue_holds(self):
        bounded = {"websockets": dict(WS, max_queue_bytes="64KB", sse_history=100)}
        a = self.start_server(deep_merge(node_config(self.redis.address, node="a"), bounded), script="ws.php")
        b = self.start_server(deep_merge(node_config(self.redis.address, node="b"), bounded), script="ws.php")
        for srv, name in ((a, "a"), (b, "b")):
            self.assertTrue(srv.wait_for_log(f'node "{name}" connected to redis'), srv.stderr())
        first = self.sse(a, "/events?topic=big")
        self.subscribed(a, 1)
        m = re.search(r"rpc: listening on (tcp://\S+)", a.stderr())
        rpc = Rpc(m.group(1))
        self.addCleanup(rpc.close)

        def publish(text):
            self.assertEqual(rpc.call("websockets.Publish", {"topics": ["big"], "message": text}), (True, True))
        publish("m0")
        start = first.data_event()["id"]
        publish("h" * 70000)  # over max_queue_bytes: not kept in Redis
        self.assertEqual(len(first.data_event()["data"]), 70000, "delivered live all the same")
        for i in range(1, 21):  # 20 × ~10 KB: twice what a resume reads
            publish(f"{i:02d}" + "x" * 10000)
        self.assertTrue(wait_until(lambda: self.redis.command("LLEN", "ferry:h:big") == 21, 5),
                        self.redis.command("LLEN", "ferry:h:big"))
        again = self.sse(b, "/events?topic=big", f"Last-Event-ID: {start}\r\n")
        got = []
        while True:
            try:
                got.append(again.data_event(timeout=1)["data"][:2])
            except (TimeoutError, OSError, AssertionError):
                break
        self.assertTrue(5 <= len(got) <= 7, got)  # ~64 KB of ~10 KB events, the newest
        self.assertEqual(got, sorted(got), "in order")
        self.assertEqual(got[-1], "20")

    def test_ids_are_the_same_on_every_node(self):
        a, b = self.node("a"), self.node("b")
        on_a = self.sse(a, "/events?topic=t")
        on_b = self.sse(b, "/events?topic=t")
        self.subscribed(a, 1)
        self.subscribed(b, 1)
        b.request("GET", "/publish?topic=t&msg=one")
        a.request("GET", "/publish?topic=t&msg=two")
        got_a = [on_a.data_event() for _ in range(2)]
        got_b = [on_b.data_event() for _ in range(2)]
        self.assertEqual(sorted((e["id"], e["data"]) for e in got_a), sorted((e["id"], e["data"]) for e in got_b))


class Outage(BrokerCase):
    def two_nodes_on_t(self):
        """Nodes a and b, a client on each (on_a, on_b) in topic t, both nodes subscribed in Redis."""
        a, b = self.node("a"), self.node("b")
        self.ws.connect(self.url(a, "?topics=t"), "on_a")
        self.ws.connect(self.url(b, "?topics=t"), "on_b")
        self.subscribed(a, 1)
        self.subscribed(b, 1)
        return a, b

    def probe_until_crossing(self, sender_srv, receiver, timeout):
        """Publishes "probe:<i>" on sender_srv until `receiver` gets one; returns the seconds it took."""
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < timeout:
            sender_srv.request("GET", f"/publish?topic=t&msg=probe:{i}")
            i += 1
            try:
                got = self.ws.text(receiver, timeout=0.2)
                self.assertTrue(got.startswith("probe:"), got)
                return time.monotonic() - t0
            except AssertionError as e:
                if not str(e).startswith("no message event"):
                    raise
        self.fail(f"no message crossed within {timeout} s")

    def test_redis_killed_then_back(self):
        a, b = self.two_nodes_on_t()
        b.request("GET", "/publish?topic=t&msg=before")
        self.assertEqual(self.ws.text("on_a"), "before")
        self.assertEqual(self.ws.text("on_b"), "before")

        self.redis.kill()
        self.assertTrue(wait_until(lambda: metric(b, "ferry_broker_up") == 0, 5))
        self.assertTrue(b.wait_for_log("lost redis at"))
        status, body = ready(b)
        self.assertEqual(status, 200, "a broker down does not make the node unready by default")
        self.assertIn("broker: redis down", body)
        self.assertEqual(ready(b, "?plugin=broker")[0], 503)
        # Local delivery goes on; what would have crossed is counted as lost.
        for i in range(5):
            b.request("GET", f"/publish?topic=t&msg=during:{i}")
            self.assertEqual(self.ws.text("on_b"), f"during:{i}")
        self.assertGreaterEqual(metric(b, "ferry_broker_dropped_total", reason="down"), 5)

        self.redis.start()
        took = self.probe_until_crossing(b, "on_a", 8)
        self.assertLess(took, 5, "cross-node delivery back within 5 s of Redis returning")
        self.assertTrue(wait_until(lambda: metric(a, "ferry_broker_up") == 1, 5))
        self.assertGreaterEqual(metric(a, "ferry_broker_reconnects_total"), 1)
        self.assertEqual(ready(a, "?plugin=broker")[0], 200)
        # Nothing from the outage arrives late, nothing twice: on_a sees the probes and then "after".
        b.request("GET", "/publish?topic=t&msg=after")
        seen = []
        while True:
            m = self.ws.text("on_a", timeout=5)
            seen.append(m)
            if m == "after":
                break
        self.assertFalse([m for m in seen if m.startswith("during")], seen)
        self.assertEqual(len(seen), len(set(seen)), seen)

    def test_a_hanging_redis_is_noticed_and_left(self):
        a, b = self.two_nodes_on_t()
        os.kill(self.redis.proc.pid, signal.SIGSTOP)  # accepts nothing, answers nothing, closes nothing
        try:
            self.assertTrue(b.wait_for_log("no answer for 3 s", timeout=10), b.stderr())
            b.request("GET", "/publish?topic=t&msg=while-hung")
            self.assertEqual(self.ws.text("on_b"), "while-hung", "local delivery goes on")
        finally:
            os.kill(self.redis.proc.pid, signal.SIGCONT)
        took = self.probe_until_crossing(b, "on_a", 10)
        self.assertLess(took, 8)
        self.assertNotIn("while-hung", [m.get("data") for m in self.ws.drain(0.5) if m.get("name") == "on_a"])

    def test_a_backlog_past_16_mib_is_dropped_not_held(self):
        # The receiver's queue holds all 40 MiB, so each of them must arrive (with the default 4 MB, a client
        # slower than the sender would rightly lose the oldest: that is ws_delivery's subject, not this one).
        relay = {"websockets": dict(WS, relay=True, max_queue_bytes="64MB")}
        a = self.start_server(deep_merge(node_config(self.redis.address, node="a"), relay), script="ws.php")
        self.assertTrue(a.wait_for_log('node "a" connected to redis'), a.stderr())
        self.ws.connect(self.url(a, "?topics=big"), "sender")
        self.ws.connect(self.url(a, "?topics=big"), "local")
        self.subscribed(a, 1)
        os.kill(self.redis.proc.pid, signal.SIGSTOP)  # the socket's buffers fill, then the node's own
        try:
            for i in range(40):  # 40 MiB within the 3 s a silent Redis is given
                self.ws.cmd("send", "sender", repeat=chr(ord("a") + i % 26), size=1 << 20)
            for i in range(40):
                self.assertEqual(self.ws.message("local", timeout=20)["len"], 1 << 20, "local delivery goes on")
            self.assertTrue(wait_until(lambda: metric(a, "ferry_broker_dropped_total", reason="backlog") > 0, 10))
            self.assertTrue(a.wait_for_log("redis takes messages slower than they are published"))
        finally:
            os.kill(self.redis.proc.pid, signal.SIGCONT)
        # What was held (16 MiB at most) went with the session; the node is back.
        self.assertTrue(wait_until(lambda: metric(a, "ferry_broker_up") == 1, 10))

    def test_what_is_not_an_envelope_on_our_channel_is_counted_and_skipped(self):
        a = self.node("a")
        self.ws.connect(self.url(a, "?topics=t"), "on_a")
        self.subscribed(a, 1)
        self.assertEqual(self.redis.command("PUBLISH", "ferry:t:t", "not msgpack"), 1)
        self.assertEqual(self.redis.command("PUBLISH", "ferry:t:t", b"\x93\x01\x02"), 1)
        self.assertTrue(wait_until(lambda: metric(a, "ferry_broker_dropped_total", reason="invalid") == 2, 5))
        self.assertTrue(a.wait_for_log("is not Ferry's"))
        b = self.node("b")
        b.request("GET", "/publish?topic=t&msg=still-fine")
        self.assertEqual(self.ws.text("on_a"), "still-fine", "the node goes on")


class NotRedis(BrokerCase):
    def fake_service(self, answer):
        """A TCP service on a free port that answers every connection with `answer` (None: says nothing)."""
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(16)
        self.addCleanup(ls.close)
        held = []

        def serve():
            while True:
                try:
                    c, _ = ls.accept()
                except OSError:
                    return
                held.append(c)
                if answer is not None:
                    try:
                        c.recv(4096)
                        c.sendall(answer)
                    except OSError:
                        pass
        threading.Thread(target=serve, daemon=True).start()
        self.addCleanup(lambda: [c.close() for c in held])
        return f"127.0.0.1:{ls.getsockname()[1]}"

    def check_serves_locally(self, srv):
        self.ws.connect(self.url(srv, "?topics=t"), "local")
        srv.request("GET", "/publish?topic=t&msg=still-local")
        self.assertEqual(self.ws.text("local"), "still-local")
        self.assertEqual(ready(srv, "?plugin=broker")[0], 503)

    def test_an_http_server_on_the_port(self):
        addr = self.fake_service(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        srv = self.start_server(node_config(addr), script="ws.php")
        self.assertTrue(srv.wait_for_log("did not answer as Redis does"), srv.stderr())
        self.assertIn("Protocol error", srv.stderr())
        self.check_serves_locally(srv)

    def test_a_silent_service_on_the_port(self):
        addr = self.fake_service(None)
        srv = self.start_server(node_config(addr, connect_timeout="500ms"), script="ws.php")
        self.assertTrue(srv.wait_for_log("no answer within 500 ms", timeout=5), srv.stderr())
        self.check_serves_locally(srv)

    def test_a_name_that_does_not_resolve(self):
        srv = self.start_server(node_config("no-such-host.invalid:6379", connect_timeout="1s"), script="ws.php")
        self.assertTrue(wait_until(lambda: re.search(r"no-such-host\.invalid:6379: (cannot resolve|no address)",
                                                     srv.stderr()), 10), srv.stderr())
        self.check_serves_locally(srv)

    def test_nothing_listening(self):
        srv = self.start_server(node_config(f"127.0.0.1:{free_port()}"), script="ws.php")
        self.assertTrue(srv.wait_for_log("Connection refused"), srv.stderr())
        self.check_serves_locally(srv)
        self.assertEqual(srv.stderr().count("Connection refused"), 1, "one line, not one per attempt")


class Password(BrokerCase):
    def setUp(self):
        super().setUp()
        self.redis.close()
        self.redis = RedisServer(password="s3cret").start()
        self.addCleanup(self.redis.close)

    def test_without_the_password(self):
        srv = self.start_server(node_config(self.redis.address), script="ws.php")
        self.assertTrue(srv.wait_for_log("NOAUTH"), srv.stderr())
        self.assertIn("websockets.broker.password", srv.stderr())

    def test_with_a_wrong_password(self):
        srv = self.start_server(node_config(self.redis.address, password="nope"), script="ws.php")
        self.assertTrue(srv.wait_for_log("refused the password"), srv.stderr())

    def test_with_the_password(self):
        a = self.node("a", password="s3cret")
        b = self.node("b", password="s3cret")
        self.ws.connect(self.url(a, "?topics=t"), "on_a")
        self.subscribed(a, 1)
        b.request("GET", "/publish?topic=t&msg=authorized")
        self.assertEqual(self.ws.text("on_a"), "authorized")


if __name__ == "__main__":
    unittest.main()
