"""Descriptors (issue 41, item 4): the server raises its soft RLIMIT_NOFILE to the hard one at start (workers
keep the one it had), and with the descriptor table full, static files that exist are never refused with 403
(503 with Retry-After instead), accepting pauses instead of spinning, and the descriptors come back once the
clients leave (the file cache drops unused files)."""
import os
import re
import socket
import tempfile
import threading
import time
import unittest

from harness import HOST, Reader, Server, metrics_address, probe_get, wait_until

FILES = 600


def soft_nofile(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no Max open files in /proc/%d/limits" % pid)


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def body_of(i):
    return b"file %d\n" % i * (1 + i % 7)


class DescriptorsTest(unittest.TestCase):
    def server(self, nofile, config=None):
        srv = Server(config or {}, prefix=["prlimit", "--nofile=" + nofile])
        srv.start()
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        return srv

    def test_the_soft_limit_is_raised_to_the_hard_one_and_workers_keep_the_original(self):
        srv = self.server("128:4096")
        self.assertEqual(soft_nofile(srv.proc.pid), (4096, 4096))
        self.assertTrue(srv.wait_for_log("descriptors: soft limit raised from 128 to 4096"), srv.stderr())
        workers = srv.workers()
        self.assertTrue(workers)
        for pid in workers:  # PHP's select() wants descriptors below 1024: workers get what ferry got
            self.assertEqual(soft_nofile(pid), (128, 4096), pid)
        status, _, _ = srv.request("GET", "/")
        self.assertEqual(status, 200)

    def test_a_full_descriptor_table_gives_503_never_403_and_the_descriptors_come_back(self):
        tmp = tempfile.TemporaryDirectory(prefix="ferry-fds-")
        self.addCleanup(tmp.cleanup)
        for i in range(FILES):
            with open(os.path.join(tmp.name, "f%03d.txt" % i), "wb") as f:
                f.write(body_of(i))
        srv = self.server("128:128", {"http": {"middleware": ["static"], "static": {"dir": tmp.name}},
                                      "metrics": {"address": f"{HOST}:0"}})
        pid = srv.proc.pid
        self.assertEqual(soft_nofile(pid), (128, 128))
        status, _, body = srv.request("GET", "/f000.txt")
        self.assertEqual((status, body), (200, body_of(0)))
        time.sleep(0.2)
        start = open_fds(pid)

        # More keep-alive clients than the limit allows connections, each asking for files across all 600.
        clients, per_client = 150, 12
        results, errors = [], []
        lock = threading.Lock()
        socks = [socket.create_connection((HOST, srv.port), timeout=20) for _ in range(clients)]

        def client(k, s):
            got = []
            try:
                rd = Reader(s)
                for j in range(per_client):
                    i = (k * 37 + j * 101) % FILES
                    s.sendall(b"GET /f%03d.txt HTTP/1.1\r\nHost: x\r\n\r\n" % i)
                    r = rd.read_response()
                    got.append((i, r.status, r.header("Retry-After"), r.body))
            except OSError as e:
                with lock:
                    errors.append(repr(e))
            finally:
                s.close()
            with lock:
                results.extend(got)

        threads = [threading.Thread(target=client, args=(k, s)) for k, s in enumerate(socks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "clients still waiting after 60 s")
        self.assertEqual(errors, [])
        self.assertEqual(len(results), clients * per_client)
        by_status = {}
        for i, status, retry_after, body in results:
            by_status[status] = by_status.get(status, 0) + 1
            if status == 200:
                self.assertEqual(body, body_of(i), i)
            else:  # the file exists: never 403 or 404, at most "try again"
                self.assertEqual(status, 503, (i, status, body))
                self.assertEqual(retry_after, "1")
        self.assertGreater(by_status.get(200, 0), len(results) // 2, by_status)

        # The table was full: accepting paused (logged once per burst, not once per failed accept).
        _, _, text = probe_get(metrics_address(srv), "/metrics")
        accept_refused = float(re.search(r'^ferry_descriptor_exhaustion_total\{where="accept"\} (\S+)$', text,
                                         re.M).group(1))
        self.assertGreater(accept_refused, 0, text)
        self.assertRegex(text, r"(?m)^ferry_descriptor_limit 128$")
        log = srv.stderr()
        self.assertLessEqual(log.count("out of descriptors"), 3, log[-3000:])
        self.assertNotIn("accept failed", log)

        # The clients are gone: the cached files close within seconds, back near the start figure, and the
        # server still answers.
        self.assertTrue(wait_until(lambda: open_fds(pid) <= start + 4, 8.0),
                        f"{open_fds(pid)} descriptors open, {start} at the start: {os.listdir(f'/proc/{pid}/fd')}")
        for i in (1, 299, 599):
            status, _, body = srv.request("GET", "/f%03d.txt" % i)
            self.assertEqual((status, body), (200, body_of(i)))


if __name__ == "__main__":
    unittest.main()
