"""examples/cluster: its one script (run.sh) starts Redis, two Ferry nodes running the chat example with
websockets.broker: redis, and nginx in front, on free ports; WebSockets and server-sent events through nginx
reach users on both nodes, two browsers on different nodes chat, and the script stops everything it started."""

import hashlib
import hmac
import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import unittest
import urllib.parse

from harness import BIN, ROOT, wait_until
from redis_server import encode, free_port, read_reply
from wsclient import NODE_DIR, NodeWs, SseClient, node_ready

SECRET = "e2e-cluster-secret"
CHROMIUM = "/usr/bin/chromium"


def signed(name):
    return name + "." + hmac.new(SECRET.encode(), name.encode(), hashlib.sha256).hexdigest()


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def subscribers(port, channel):
    """How many Redis clients (nodes) are subscribed to `channel`."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(encode(("PUBSUB", "NUMSUB", channel)))
        return read_reply(s.makefile("rb"))[1]


class Endpoint:
    """What SseClient needs of a server: a port and an address."""

    def __init__(self, port):
        self.port = port
        self.address = f"127.0.0.1:{port}"


class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = node_ready()
        if missing:
            raise AssertionError(missing)
        cls.ports = dict(CLUSTER_PORT=free_port(), NODE1_PORT=free_port(), NODE2_PORT=free_port(),
                         REDIS_PORT=free_port())
        env = dict(os.environ, FERRY=BIN, CHAT_SECRET=SECRET, **{k: str(v) for k, v in cls.ports.items()})
        cls.proc = subprocess.Popen(["bash", os.path.join(ROOT, "examples", "cluster", "run.sh")], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
        cls.output = []
        ready = threading.Event()

        def read():
            for line in cls.proc.stdout:
                cls.output.append(line)
                if line.startswith("cluster: ready"):
                    ready.set()
        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60):
            cls.stop_cluster()
            raise AssertionError("run.sh did not say ready: " + "".join(cls.output) + cls.proc.stderr.read())

    @classmethod
    def stop_cluster(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGINT)
            try:
                cls.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(cls.proc.pid, signal.SIGKILL)
                cls.proc.wait(5)

    @classmethod
    def tearDownClass(cls):
        cls.stop_cluster()

    def setUp(self):
        self.ws = NodeWs()
        self.addCleanup(self.ws.close)

    def port(self, name):
        return self.ports[name]

    def test_websockets_through_nginx_reach_both_nodes(self):
        url = f"ws://127.0.0.1:{self.port('CLUSTER_PORT')}/chat"
        nodes = set()
        for i in range(4):
            name = f"u{i}"
            self.ws.connect(url, name, headers={"Cookie": f"chat_user={signed(name)}"})
            welcome = self.ws.text(name)
            self.assertTrue(welcome.startswith(f"welcome, {name} (connection node-"), welcome)
            nodes.add(welcome.split("(connection ")[1].split(".")[0])
        self.assertEqual(nodes, {"node-1", "node-2"}, "nginx spread the connections over both nodes")
        self.ws.send("hello everyone", "u0")
        for i in range(4):
            self.assertEqual(self.ws.text(f"u{i}"), "u0: hello everyone")

    def test_the_feed_through_nginx_has_every_login(self):
        cookie = f"Cookie: chat_user={signed('reader')}\r\n"
        feed = SseClient(Endpoint(self.port("CLUSTER_PORT")), "/feed?topic=feed", cookie)
        self.addCleanup(feed.close)
        self.assertEqual(feed.status, 200)
        # The reader's node subscribes once PHP has joined the stream to "feed" (just after the 200).
        self.assertTrue(wait_until(lambda: subscribers(self.port("REDIS_PORT"), "ferry:t:feed") >= 1, 10))
        for i in range(4):  # nginx alternates: logins on both nodes
            c = http.client.HTTPConnection("127.0.0.1", self.port("CLUSTER_PORT"), timeout=10)
            c.request("POST", "/login", urllib.parse.urlencode({"name": f"joiner{i}"}),
                      {"Content-Type": "application/x-www-form-urlencoded"})
            self.assertEqual(c.getresponse().status, 303)
            c.close()
        seen = set()
        while len(seen) < 4:
            data = feed.data_event()["data"]
            if data.startswith("joiner"):
                seen.add(data)
        self.assertEqual(seen, {f"joiner{i} joined" for i in range(4)})

    def test_two_browsers_on_different_nodes_chat(self):
        if not os.access(CHROMIUM, os.X_OK):
            self.fail(f"{CHROMIUM} is not installed: run scripts/setup.sh")
        proc = subprocess.run(["node", "chat_browser.js", f"http://127.0.0.1:{self.port('NODE1_PORT')}",
                               f"--bob=http://127.0.0.1:{self.port('NODE2_PORT')}"],
                              cwd=NODE_DIR, capture_output=True, text=True, timeout=90)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        self.assertTrue(lines, proc.stderr)
        result = json.loads(lines[-1])
        self.assertEqual(result["result"], "ok", json.dumps(result, indent=1))
        d = result["detail"]
        self.assertIn("bob joined", d["alice"]["feed"], "bob signed in on node-2, alice reads node-1's feed")
        self.assertIn("bob: hi alice, bob here", d["alice"]["messages"])
        self.assertIn("alice: hello from alice", d["bob"]["messages"])
        welcome = [m for m in d["alice"]["messages"] if m.startswith("welcome, alice")]
        self.assertTrue(welcome and "(connection node-1." in welcome[0], welcome)
        welcome = [m for m in d["bob"]["messages"] if m.startswith("welcome, bob")]
        self.assertTrue(welcome and "(connection node-2." in welcome[0], welcome)

    def test_zz_the_script_stops_everything(self):  # last (unittest sorts by name)
        self.stop_cluster()
        self.assertEqual(self.proc.returncode, 130, "run.sh ends as an interrupted script does")
        self.assertTrue(wait_until(lambda: "cluster: stopped\n" in self.output, 5), self.output)
        for name, port in self.ports.items():
            self.assertFalse(accepts(port), f"{name} {port} still accepts after the script stopped")


if __name__ == "__main__":
    unittest.main()
