"""The WebSocket tests' base (test_websockets.py, test_ws_delivery.py, test_ws_events.py): a server running
tests/php/ws.php with WebSockets on /ws, a Node `ws` client per test, raw sockets."""

from harness import ServerTestCase
from wsclient import RawWs, NodeWs

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
