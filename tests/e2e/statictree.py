"""The static-file tests' base (test_static.py, test_static_io.py): a tree of files made for each test (one
outside the root, hidden ones, symlinks, precompressed siblings) and servers serving it before PHP."""

import json
import os
import socket
import tempfile
import unittest

from harness import Reader, Server

SECRET = b"TOP-SECRET-OUTSIDE-THE-ROOT"
CSS = b"body { color: #123456 }\n" * 40


def make_tree(base):
    """public/ under `base`, plus secret files beside it that must never be served."""
    pub = os.path.join(base, "public")
    for d in ("css", "img", "docs", "empty", ".git", "inner"):
        os.makedirs(os.path.join(pub, d), exist_ok=True)
    files = {
        "css/site.css": CSS,
        "img/logo.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8,
        "docs/index.html": b"<h1>docs</h1>\n",
        "index.html": b"<h1>home</h1>\n",
        "data.unknownext": b"??",
        "form.html": b"<form method=post></form>\n",
        "script.php": b"<?php echo 1;",
        "notes.txt": b"plain notes\n",
        ".env": SECRET + b" in .env",
        ".git/config": SECRET + b" in .git",
        "css/.hidden.css": SECRET + b" hidden css",
        "inner/target.txt": b"inside target\n",
        "empty.txt": b"",
    }
    for name, data in files.items():
        with open(os.path.join(pub, name), "wb") as f:
            f.write(data)
    with open(os.path.join(base, "secret.txt"), "wb") as f:
        f.write(SECRET)
    os.makedirs(os.path.join(base, "outside"), exist_ok=True)
    with open(os.path.join(base, "outside", "secret.txt"), "wb") as f:
        f.write(SECRET)
    os.symlink(os.path.join(base, "secret.txt"), os.path.join(pub, "link-out.txt"))
    os.symlink(os.path.join(base, "outside"), os.path.join(pub, "linkdir"))
    os.symlink("inner/target.txt", os.path.join(pub, "link-in.txt"))
    return pub


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def raw(srv, request, timeout=10):
    """Sends raw request bytes on a fresh connection; returns the parsed Response."""
    s = srv.socket(timeout)
    try:
        s.sendall(request)
        return Reader(s).read_response(head_request=request.startswith(b"HEAD "))
    finally:
        s.close()


class StaticCase(unittest.TestCase):
    def setUp(self):
        self.base = tempfile.TemporaryDirectory(prefix="ferry-static-")
        self.addCleanup(self.base.cleanup)
        self.pub = make_tree(self.base.name)

    def server(self, static=None, http=None, **kw):
        st = {"dir": self.pub}
        st.update(static or {})
        cfg = {"http": {"middleware": ["static"], "static": st}}
        cfg["http"].update(http or {})
        srv = Server(cfg, **kw)
        srv.start()
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())  # runs first: a clean stop, checked
        return srv

    def get(self, srv, path, headers=None, method="GET"):
        status, hdrs, body = srv.request(method, path, headers=headers)
        return status, {k.lower(): v for k, v in hdrs}, body

    def assertPhp(self, srv, path, method="GET", **kw):
        status, h, body = self.get(srv, path, method=method, **kw)
        self.assertEqual(status, 200, (path, body))
        self.assertEqual(h.get("content-type"), "application/json", (path, body))
        self.assertNotIn(SECRET, body)
        return json.loads(body)


def _drain_to_eof(s, timeout=10):
    """Reads until the peer closes: the bytes received, or None if it is still open after `timeout`."""
    s.settimeout(timeout)
    total = 0
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return total
            total += len(chunk)
    except (TimeoutError, socket.timeout):
        return None
    except OSError:
        return total
