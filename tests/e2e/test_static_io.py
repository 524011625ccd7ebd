"""Static files under change and under load (http.static): a file replaced, deleted or truncated while cached
or sent, a 100 MiB download beside other requests, clients that stop reading (the write timeout), and
configuration errors."""

import hashlib
import os
import socket
import subprocess
import time
import unittest

from harness import BIN, IO_THREADS, Reader, Server, wait_until
from statictree import StaticCase, _drain_to_eof, _read


class StaticIoTest(StaticCase):
    # ---------------------------------------------------------------- files changing on disk

    def test_a_file_replaced_or_deleted_while_cached(self):
        srv = self.server({"calculate_etag": True})
        path = os.path.join(self.pub, "notes.txt")
        _, h, body = self.get(srv, "/notes.txt")
        self.assertEqual(body, b"plain notes\n")
        old_etag = h["etag"]
        # Replaced by rename, as editors and deploy tools do: new content and ETag within a second.
        with open(path + ".new", "wb") as f:
            f.write(b"new notes, longer than before\n")
        os.rename(path + ".new", path)
        seen = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            _, h, body = self.get(srv, "/notes.txt")
            self.assertIn(body, (b"plain notes\n", b"new notes, longer than before\n"))  # never a mix
            seen.append((body, h["etag"]))
            if body.startswith(b"new"):
                break
            time.sleep(0.1)
        self.assertEqual(seen[-1][0], b"new notes, longer than before\n")
        self.assertNotEqual(seen[-1][1], old_etag)
        # Every event loop has its own cache, each revalidated within a second.
        self.assertTrue(wait_until(lambda: self.get(srv, "/notes.txt", {"If-None-Match": old_etag})[0] == 200, 3))
        # Rewritten in place (same inode, same size, new mtime).
        time.sleep(0.02)
        with open(path, "r+b") as f:
            f.write(b"NEW")
        self.assertTrue(wait_until(lambda: self.get(srv, "/notes.txt")[2].startswith(b"NEW"), 3))
        # Deleted: PHP's within a second, no crash.
        os.unlink(path)
        self.assertTrue(wait_until(lambda: self.get(srv, "/notes.txt")[1].get("content-type") == "application/json", 3))
        # Created: served within a second (a cached "missing" does not last).
        with open(os.path.join(self.pub, "fresh.txt"), "wb") as f:
            f.write(b"fresh\n")
        self.assertTrue(wait_until(lambda: self.get(srv, "/fresh.txt")[2] == b"fresh\n", 3))

    def test_a_file_truncated_while_sent_closes_the_connection(self):
        big = os.path.join(self.pub, "shrinking.bin")
        with open(big, "wb") as f:
            f.truncate(64 * 1024 * 1024)
        srv = self.server()
        s = srv.socket()
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(b"GET /shrinking.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        _, status, _, headers = rd.read_head()
        self.assertEqual(status, 200)
        self.assertEqual(dict(headers)["Content-Length"], str(64 * 1024 * 1024))
        time.sleep(0.3)  # the server is waiting for room in the socket
        os.truncate(big, 1024 * 1024)
        got = len(rd.buf)
        s.settimeout(10)
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        self.assertLess(got, 64 * 1024 * 1024)  # cut short, and the connection closed: never a silent short body
        srv.wait_for_log("got shorter while it was sent")
        self.assertEqual(self.get(srv, "/notes.txt")[0], 200)

    # ---------------------------------------------------------------- big files and slow clients

    def test_a_100_mib_download_while_other_requests_are_answered(self):
        big = os.path.join(self.pub, "big.bin")
        block = hashlib.sha256(b"ferry").digest() * 32768  # 1 MiB
        with open(big, "wb") as f:
            for i in range(100):
                f.write(block[i:] + block[:i])
        want = hashlib.sha256(_read(big)).hexdigest()
        srv = self.server()
        out = os.path.join(self.base.name, "download.bin")
        curl = subprocess.Popen(["curl", "-sS", "--max-time", "60", "--limit-rate", "40M", "-o", out,
                                 srv.url("/big.bin")])
        self.addCleanup(lambda: curl.poll() is None and curl.kill())
        slowest = 0.0
        answered = 0
        while curl.poll() is None and answered < 400:
            t0 = time.monotonic()
            self.assertEqual(self.get(srv, "/css/site.css")[0], 200)
            self.assertEqual(self.assertPhp(srv, "/php")["path"], "/php")
            slowest = max(slowest, time.monotonic() - t0)
            answered += 1
        self.assertEqual(curl.wait(timeout=60), 0)
        self.assertGreater(answered, 5)  # the download took a while, and the others were served meanwhile
        self.assertLess(slowest, 1.0)
        self.assertEqual(hashlib.sha256(_read(out)).hexdigest(), want)

    def test_a_client_that_stops_reading_blocks_nothing_and_leaks_no_descriptor(self):
        big = os.path.join(self.pub, "stall.bin")
        with open(big, "wb") as f:
            f.truncate(50 * 1024 * 1024)
        srv = self.server(http={"timeouts": {"write": "2s"}})
        pid = srv.proc.pid

        def open_on_big():
            n = 0
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    n += os.readlink(f"/proc/{pid}/fd/{fd}") == big
                except OSError:
                    pass
            return n

        stalled = []
        for _ in range(3):
            s = srv.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
            s.sendall(b"GET /stall.bin HTTP/1.1\r\nHost: x\r\n\r\n")
            stalled.append(s)
        time.sleep(0.3)
        t0 = time.monotonic()
        for _ in range(20):
            self.assertEqual(self.get(srv, "/notes.txt")[0], 200)
            self.assertPhp(srv, "/php")
        self.assertLess(time.monotonic() - t0, 5)
        # One cached descriptor per event loop, shared by the responses on that loop.
        self.assertGreaterEqual(open_on_big(), 1)
        self.assertLessEqual(open_on_big(), min(3, IO_THREADS))
        # The write timeout (2 s without progress) ends the stalled responses and closes their connections,
        # each with a log line: read nothing until the three lines are there, then everything that came.
        self.assertTrue(wait_until(lambda: srv.stderr().count("(http.timeouts.write)") >= 3, 15),
                        "three stalled downloads, three write timeouts logged")
        for s in stalled:
            got = _drain_to_eof(s)
            self.assertIsNotNone(got, "the server kept the stalled connection open")
            self.assertLess(got, 50 * 1024 * 1024)
            s.close()
        self.assertLessEqual(open_on_big(), min(3, IO_THREADS))  # cached, not leaked
        self.assertEqual(self.get(srv, "/notes.txt")[0], 200)

    # ---------------------------------------------------------------- configuration

    def test_config_errors_name_the_key(self):
        srv = Server({"http": {"middleware": ["static"], "static": {"dir": os.path.join(self.pub, "nope")}}})
        self.addCleanup(srv.close)
        r = subprocess.run([BIN, "serve", "-c", srv.config_path], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 1)
        self.assertIn("http.static.dir", r.stderr)
        for static, key, value in (({"on_forbidden": "maybe"}, "http.static.on_forbidden", "maybe"),
                                   ({"on_missing": "410"}, "http.static.on_missing", "410"),
                                   ({"response": {"Bad Name": "x"}}, "http.static.response", "Bad Name"),
                                   ({"index": ["../x.html"]}, "http.static.index", "../x.html"),
                                   ({"max_open_files": 0}, "http.static.max_open_files", "0")):
            st = {"dir": self.pub}
            st.update(static)
            bad = Server({"http": {"middleware": ["static"], "static": st}})
            self.addCleanup(bad.close)
            r = subprocess.run([BIN, "config", "-c", bad.config_path], capture_output=True, text=True, timeout=20)
            self.assertNotEqual(r.returncode, 0, static)
            self.assertIn(key, r.stderr)
            self.assertIn(value, r.stderr)
        # Middleware Ferry lacks is named in a warning; the server runs.
        srv2 = self.server(http={"middleware": ["static", "gzip"]})
        srv2.wait_for_log('"gzip" is not supported')


if __name__ == "__main__":
    unittest.main()
