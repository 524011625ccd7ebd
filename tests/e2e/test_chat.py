"""The chat example (examples/chat): its own .rr.yaml served as it is (`ferry serve -w examples/chat`, with the
addresses moved to free ports), its PHP worker in both roles (HTTP: /login, /me; websockets: /chat, /feed), first
through plain clients (http.client, Node `ws`, raw sockets), then in a real browser (Debian's chromium driven by
playwright-core: tests/e2e/node/chat_browser.js)."""

import hashlib
import hmac
import json
import os
import queue
import re
import subprocess
import threading
import time
import unittest
import urllib.parse

from harness import IO_THREADS, MARK_VAR, ROOT, Server, ServerTestCase, wait_until
from harness import Rpc
from wsclient import NODE_DIR, NodeWs, RawWs, SseClient, node_ready

EXAMPLE = os.path.join(ROOT, "examples", "chat")
SECRET = "e2e-chat-secret"
DEV_SECRET = "ferry-chat-dev-secret"  # the worker's default without CHAT_SECRET
CHROMIUM = "/usr/bin/chromium"


FeedClient = SseClient

def signed(name, secret=SECRET):
    return name + "." + hmac.new(secret.encode(), name.encode(), hashlib.sha256).hexdigest()


def chat_server(extra=()):
    """The example's own config, run from its directory: free ports, this test's marker and secret; `extra`:
    more arguments (test_tls: http.ssl)."""
    srv = Server()
    srv.args = [*extra, "-w", EXAMPLE, "-c", ".rr.yaml",
                "-o", "http.address=127.0.0.1:0",
                "-o", "rpc.listen=tcp://127.0.0.1:0",
                "-o", f"http.io_threads={IO_THREADS}",
                "-o", f"server.env.{MARK_VAR}={srv.marker}",
                "-o", f"server.env.CHAT_SECRET={SECRET}"]
    srv.start()
    return srv


def browser_missing():
    """'' when chromium, Node and playwright-core are there (scripts/setup.sh installs them), else what is not."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is not installed: run scripts/setup.sh (it installs Debian's chromium)"
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "playwright-core")):
        return "tests/e2e/node/node_modules/playwright-core is missing (run scripts/setup.sh)"
    return node_ready()


def rpc_address(srv):
    found = []

    def look():
        m = re.search(r"rpc: listening on (tcp://127\.0\.0\.1:\d+)", srv.stderr())
        if m:
            found.append(m.group(1))
        return bool(m)
    if not wait_until(look, 5.0):
        raise AssertionError("no 'rpc: listening on' line in ferry's log:\n" + srv.stderr())
    return found[0]


class ChatCase(ServerTestCase):
    """One chat server per class (ServerTestCase stops and checks it), started from the example's own config."""

    @classmethod
    def setUpClass(cls):
        cls.server = chat_server()

    def login(self, name):
        body = urllib.parse.urlencode({"name": name})
        return self.server.request("POST", "/login", body=body,
                                   headers={"Content-Type": "application/x-www-form-urlencoded"})

    def sse(self, cookie=None, query="?topic=feed"):
        headers = f"Cookie: {cookie}\r\n" if cookie else ""
        c = FeedClient(self.server, "/feed" + query, headers)
        self.addCleanup(c.close)
        return c

    def node(self):
        n = NodeWs()
        self.addCleanup(n.close)
        return n

    def ws_url(self):
        return f"ws://{self.server.address}/chat"


class ChatHttp(ChatCase):
    def test_static_page_is_served_by_ferry(self):
        status, headers, body = self.server.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertIn("text/html", dict(headers)["Content-Type"])
        for element in ('id="name"', 'id="login"', 'id="message"', 'id="send"', 'id="messages"', 'id="feed"',
                        'id="status"', 'action="/login"'):
            self.assertIn(element.encode(), body)
        for path in ("/app.js", "/style.css"):
            status, _, _ = self.server.request("GET", path)
            self.assertEqual(status, 200, path)

    def test_login_sets_a_signed_cookie(self):
        status, headers, body = self.login("alice")
        self.assertEqual(status, 303, body)
        h = [(k.lower(), v) for k, v in headers]
        self.assertIn(("location", "/"), h)
        cookies = [v for k, v in h if k == "set-cookie"]
        user = [c for c in cookies if c.startswith("chat_user=")]
        self.assertEqual(len(user), 1, cookies)
        attrs = [a.strip() for a in user[0].split(";")]
        self.assertEqual(attrs[0], "chat_user=" + signed("alice"), "HMAC-SHA256 with CHAT_SECRET")
        self.assertEqual(sorted(attrs[1:]), ["HttpOnly", "Path=/", "SameSite=Lax"])

    def test_me(self):
        self.assertEqual(self.server.request("GET", "/me")[0], 401)
        status, _, body = self.server.request("GET", "/me", headers={"Cookie": "chat_user=" + signed("alice")})
        self.assertEqual((status, body), (200, b"alice"))
        for bad in (signed("alice", DEV_SECRET), "bob." + signed("alice").split(".")[1], "alice", "",
                    signed("alice")[:-1] + "0", "a b." + hmac.new(SECRET.encode(), b"a b", hashlib.sha256).hexdigest()):
            status, _, _ = self.server.request("GET", "/me", headers={"Cookie": "chat_user=" + bad})
            self.assertEqual(status, 401, bad)

    def test_login_validates_the_name(self):
        for bad in ("", "x" * 33, "bad name", "dot.ted", "élodie", "a;b"):
            status, headers, _ = self.login(bad)
            self.assertEqual(status, 400, bad)
            self.assertFalse([v for k, v in headers if k.lower() == "set-cookie"], bad)
        for good in ("x" * 32, "A-b_9", "z"):
            self.assertEqual(self.login(good)[0], 303, good)

    def test_other_routes_are_404(self):
        self.assertEqual(self.server.request("GET", "/login")[0], 404)
        self.assertEqual(self.server.request("GET", "/nope")[0], 404)
        self.assertEqual(self.server.request("POST", "/me", body=b"")[0], 404)


class ChatWebSockets(ChatCase):
    def test_websocket_needs_a_valid_cookie(self):
        n = self.node()
        for name, headers in (("none", {}), ("forged", {"Cookie": "chat_user=" + signed("alice", DEV_SECRET)})):
            n.connect(self.ws_url(), name=name, headers=headers, wait=False)
            e = n.expect("unexpected", name)
            self.assertEqual(e["status"], 401, name)
        raw = RawWs(self.server, "/chat")
        self.addCleanup(raw.close)
        self.assertTrue(raw.handshake().startswith("HTTP/1.1 401 "))

    def test_chat(self):
        feed = self.sse("chat_user=" + signed("watcher"))
        self.assertEqual(feed.status, 200)
        n = self.node()
        for name in ("alice", "bob"):
            n.connect(self.ws_url(), name=name, headers={"Cookie": "chat_user=" + signed(name)})
            self.assertTrue(re.fullmatch(rf"welcome, {name} \(connection \d+\.\d+\)", n.text(name)))
        n.send("  hello bob  ", "alice")
        for name in ("alice", "bob"):
            self.assertEqual(n.text(name), "alice: hello bob", "published to the chat, the sender too")
        n.send("   ", "bob")                   # empty after trimming: ignored
        n.send(b"\x00\x01binary", "bob")       # binary: ignored
        n.send("two\nlines\tand\x07 bell", "bob")
        for name in ("alice", "bob"):
            self.assertEqual(n.text(name), "bob: two lines and  bell", "control characters are spaces")
        n.send("é" * 600, "alice")
        for name in ("alice", "bob"):
            self.assertEqual(n.text(name), "alice: " + "é" * 500, "at most 500 characters")
        self.assertEqual([e for e in n.drain(0.3) if e["ev"] == "message"], [], "nothing else came")
        n.cmd("close", "alice", code=1000, reason="bye")
        self.assertEqual(n.expect("close", "alice")["code"], 1000)
        self.assertEqual(feed.data_event()["data"], "alice left")
        n.cmd("terminate", "bob")
        self.assertEqual(feed.data_event()["data"], "bob left", "a dropped connection leaves too")

    def test_login_is_announced_on_the_feed(self):
        feed = self.sse("chat_user=" + signed("watcher"))
        self.assertEqual(self.login("carol")[0], 303)
        self.assertEqual(feed.data_event()["data"], "carol joined")

    def test_feed_needs_a_valid_cookie(self):
        for cookie in (None, "chat_user=" + signed("alice", DEV_SECRET)):
            c = self.sse(cookie)
            self.assertEqual(c.status, 401, cookie)

    def test_feed_is_the_only_topic(self):
        c = self.sse("chat_user=" + signed("dave"), "?topic=chat&topic=secret")
        self.assertEqual(c.status, 200)
        n = self.node()
        n.connect(self.ws_url(), name="erin", headers={"Cookie": "chat_user=" + signed("erin")})
        n.text("erin")
        n.send("not for the feed", "erin")
        self.assertEqual(n.text("erin"), "erin: not for the feed")
        self.login("frank")
        self.assertEqual(c.data_event()["data"], "frank joined", "the chat topic was not joined")

    def test_own_join_is_shown_once_after_login(self):
        c = self.sse(f"chat_user={signed('gina')}; chat_joined=1")
        self.assertEqual(c.status, 200)
        self.assertIn("chat_joined=;", c.headers.get("set-cookie", ""), "the flag is cleared")
        self.assertEqual(c.data_event()["data"], "gina joined")

    def test_leaving_the_feed_announces_nothing(self):
        watcher = self.sse("chat_user=" + signed("watcher"))
        leaver = self.sse("chat_user=" + signed("henry"))
        self.assertEqual(leaver.status, 200)
        leaver.sock.close()
        time.sleep(0.3)
        self.login("ivan")
        self.assertEqual(watcher.data_event()["data"], "ivan joined", "no 'henry left' for a feed stream")
        with self.assertRaises(TimeoutError, msg="nothing more on the feed"):
            watcher.data_event(timeout=0.5)


class ChatBrowser(unittest.TestCase):
    """Two users in chromium (examples/chat/public/app.js): sign in, chat both ways, the feed, reconnecting."""

    def setUp(self):
        missing = browser_missing()
        if missing:
            self.fail(missing)
        self.server = chat_server()

        def cleanup():
            try:
                self.server.stop()
            finally:
                self.server.close()
        self.addCleanup(cleanup)

    def test_two_users_chat_in_the_browser(self):
        proc = subprocess.Popen(["node", "chat_browser.js", f"http://{self.server.address}", "--reconnect"],
                                cwd=NODE_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1)

        def reap():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
            for f in (proc.stdin, proc.stdout, proc.stderr):
                f.close()
        self.addCleanup(reap)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)], daemon=True).start()
        result = None
        deadline = time.monotonic() + 75  # the script's own global timeout is 60 s
        while result is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.fail("chat_browser.js gave no result within 75 s; ferry's log:\n" + self.server.stderr())
            if line is None:
                proc.wait(10)
                self.fail(f"chat_browser.js ended without a result (exit {proc.returncode}): {proc.stderr.read()}")
            msg = json.loads(line)
            if msg.get("need") == "drop":
                # Connected when needed: a connection silent for rpc.first_byte_timeout (5 s) is closed.
                rpc = Rpc(rpc_address(self.server))
                self.addCleanup(rpc.close)
                ok, res = rpc.call("websockets.Close", {"to": [msg["id"]], "code": 1012, "reason": "test drop"})
                self.assertTrue(ok, res)
                proc.stdin.write("dropped\n")
                proc.stdin.flush()
            elif "result" in msg:
                result = msg
        proc.wait(15)
        self.assertEqual(result["result"], "ok",
                         json.dumps(result, indent=1) + "\nferry's log:\n" + self.server.stderr()[-4000:])
        self.assertEqual(proc.returncode, 0)
        d = result["detail"]
        self.assertIn("bob joined", d["alice"]["feed"])
        self.assertIn("bob joined", d["bob"]["feed"])
        self.assertIn("alice left", d["bob"]["feed"])
        self.assertIn("alice: back again", d["bob"]["messages"])
        self.assertRegex(d["reconnectStatus"], r"^reconnecting in [1-5] s$")


if __name__ == "__main__":
    unittest.main()
