"""What the framework suites (test_symfony, test_laravel) share: the example copied into a test's directory and
served for a test class (AppServer), a user with a cookie jar on a keep-alive connection, and the check that a
streamed response arrives as it is printed."""

import http.client
import json
import os
import re
import shutil
import socket
import tempfile
import time
import unittest
import urllib.parse

from harness import HOST, ROOT, Server


def copy_example(name, dest, ignore=()):
    """examples/<name> as a project of its own under `dest` (what it writes stays in the test's directory)."""
    app = os.path.join(dest, "app")
    shutil.copytree(os.path.join(ROOT, "examples", name), app, ignore=shutil.ignore_patterns(*ignore))
    return app


class AppServer(unittest.TestCase):
    """One Ferry serving a fresh copy of an example for the whole test class. A suite sets PREFIX and
    defines copy_app(dest) -> app directory and config(app) -> Ferry config; a class may add POOL
    (http.pool keys) and ENV (the server's environment)."""
    PREFIX = "ferry-app-"
    ENV = {}
    POOL = {}

    @classmethod
    def copy_app(cls, dest):
        raise NotImplementedError

    @classmethod
    def config(cls, app):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix=cls.PREFIX)
        try:
            cls.app = cls.copy_app(cls.tmp.name)
            config = cls.config(cls.app)
            config["http"]["pool"].update(cls.POOL)
            cls.srv = Server(config, env=cls.ENV).start(timeout=30)
        except BaseException:
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.stop()
        finally:
            cls.srv.close()
            cls.tmp.cleanup()

    def client(self):
        c = Client(self.srv)
        self.addCleanup(c.close)
        return c


class Client:
    """One user: a keep-alive connection and a cookie jar. A dict body is sent as a urlencoded form."""

    def __init__(self, srv):
        self.conn = http.client.HTTPConnection(HOST, srv.port, timeout=20)
        self.cookies = {}

    def request(self, method, path, body=None, headers=None):
        h = dict(headers or {})
        if self.cookies:
            h["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if isinstance(body, dict):
            body = urllib.parse.urlencode(body)
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
        self.conn.request(method, path, body=body, headers=h)
        r = self.conn.getresponse()
        data = r.read()
        for value in r.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name] = rest.split(";", 1)[0]
        return r.status, r, data

    def json(self, method, path, body=None, headers=None):
        status, r, data = self.request(method, path, body, headers)
        assert status == 200, (method, path, status, data[:800])
        return json.loads(data)

    def close(self):
        self.conn.close()


def check_streamed_lines(test, srv):
    """GET /stream?n=4&ms=400: four lines printed 400 ms apart arrive chunked, the first before the others were
    produced."""
    s = socket.create_connection((HOST, srv.port), timeout=20)
    try:
        t0 = time.monotonic()
        s.sendall(b"GET /stream?n=4&ms=400 HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"line 1 " not in data:
            data += s.recv(65536)
        first = time.monotonic() - t0
        while not data.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            test.assertTrue(chunk, data)
            data += chunk
        total = time.monotonic() - t0
    finally:
        s.close()
    test.assertIn(b"Transfer-Encoding: chunked", data)
    test.assertEqual(len(re.findall(rb"line \d at ", data)), 4)
    test.assertLess(first, 1.0)  # the first line came before the other three were produced (1.2 s)
    test.assertGreater(total, 1.2)
