"""Several event loops (http.io_threads): connections spread over the loops, workers shared between them, no
request waits while a worker is idle on any loop, shutdown with connections on every loop, the port guard
of SO_REUSEPORT, max_jobs swaps that make no request wait."""

import http.client
import os
import re
import signal
import subprocess
import threading
import time
import unittest

from harness import BIN, HOST, Reader, Server, wait_until


def thread_ticks(pid):
    """What each event loop's thread has done so far, by thread id: the main thread (loop 0) and the threads
    named ferry-loop-N (a sanitizer's own thread is not counted). A pair: its CPU ticks (user + system, 10 ms
    each: a loop that served a few hundred small requests may still show none) and its voluntary context
    switches (one per wait for its sockets: hundreds for a loop that serves, a few for an idle one's ticker)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            if int(tid) != pid and not name.startswith("ferry-loop-"):
                continue
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                switches = int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", f.read(), re.M).group(1))
            out[int(tid)] = (int(fields[11]) + int(fields[12]), switches)
        except (OSError, IndexError, ValueError, AttributeError):
            pass
    return out


def hammer(srv, connections, per_connection, path="/status/200"):
    """Keep-alive clients in parallel; returns the list of statuses (or exceptions)."""
    statuses = []
    lock = threading.Lock()

    def client():
        c = http.client.HTTPConnection(HOST, srv.port, timeout=10)
        got = []
        try:
            for _ in range(per_connection):
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                got.append(r.status)
        except Exception as e:  # noqa: BLE001 - counted as a failure
            got.append(e)
        finally:
            c.close()
        with lock:
            statuses.extend(got)

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return statuses


def timed_get(srv, path, timeout=10):
    t0 = time.monotonic()
    status, _, body = srv.request("GET", path, timeout=timeout)
    return status, body, time.monotonic() - t0


class LoopsTest(unittest.TestCase):
    def start(self, config=None, **kw):
        srv = Server(config, **kw)
        self.addCleanup(srv.close)
        self.addCleanup(srv.kill)
        return srv.start()

    def test_one_thread_per_loop_and_every_loop_serves(self):
        # One worker for three loops: loops 1 and 2 own none and are served by loop 0's worker.
        srv = self.start({"http": {"io_threads": 3, "pool": {"num_workers": 1}}})
        self.assertIn("with 1 worker(s) and 3 event loop(s), accept: handoff", srv.stderr())
        pid = srv.proc.pid
        self.assertEqual(len(thread_ticks(pid)), 3)
        before = thread_ticks(pid)
        statuses = hammer(srv, connections=9, per_connection=300)
        self.assertEqual(statuses, [200] * 2700)
        after = thread_ticks(pid)
        # The connections were spread over every loop: each loop's thread ran (CPU ticks) or waited for its
        # sockets hundreds of times.
        busy = [tid for tid in after if tid in before and (after[tid][0] > before[tid][0] or
                                                           after[tid][1] - before[tid][1] >= 100)]
        self.assertEqual(len(busy), 3, (before, after))
        srv.stop()
        self.assertRegex(srv.stderr(), r"2700 request\(s\) served; \d+ waited for a worker")

    def test_no_request_waits_while_a_worker_is_idle_on_another_loop(self):
        srv = self.start({"http": {"io_threads": 2, "pool": {"num_workers": 2}}})
        results = {}
        blocked = threading.Thread(target=lambda: results.update(b=timed_get(srv, "/sleep?ms=3000")))
        blocked.start()
        time.sleep(0.3)
        # Whichever loop these connections land on, the idle worker answers them at once.
        for i in range(6):
            status, _, took = timed_get(srv, f"/status/20{i % 3}")
            self.assertEqual(status, 200 + i % 3)
            self.assertLess(took, 1.0, f"request {i} waited for the blocked worker")
        self.assertNotIn("b", results)
        blocked.join(10)
        self.assertEqual(results["b"][0], 200)

    def test_a_loop_whose_worker_is_busy_gets_the_next_one_freed_anywhere(self):
        # Two workers, both busy: the queued request is served by the first one freed, whichever loop it is.
        srv = self.start({"http": {"io_threads": 2, "pool": {"num_workers": 2}}})
        results = {}
        long = threading.Thread(target=lambda: results.update(long=timed_get(srv, "/sleep?ms=4000")))
        short = threading.Thread(target=lambda: results.update(short=timed_get(srv, "/sleep?ms=600")))
        long.start()
        time.sleep(0.1)
        short.start()
        time.sleep(0.1)
        status, _, took = timed_get(srv, "/status/200")
        self.assertEqual(status, 200)
        self.assertLess(took, 2.0, "the request waited for the long one")
        long.join(10)
        short.join(10)

    def test_shutdown_with_requests_on_every_loop(self):
        srv = self.start({"http": {"io_threads": 2, "pool": {"num_workers": 2}}})
        socks = []
        for _ in range(4):  # two per loop: the hand-off gives each new connection to the loop with fewer
            s = srv.socket()
            s.sendall(b"GET /sleep?ms=700 HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGTERM)
        for s in socks:
            r = Reader(s).read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("Connection"), "close")
            s.close()
        self.assertEqual(srv.proc.wait(15), 0, srv.stderr())
        self.assertTrue(wait_until(lambda: not srv.workers(), 3.0), srv.workers())
        self.assertIn("4 request(s) served", srv.stderr())

    def test_reuseport_serves_and_a_second_server_on_the_port_fails(self):
        for mode in ("handoff", "reuseport"):
            with self.subTest(accept=mode):
                srv = self.start({"http": {"io_threads": 2, "accept": mode}})
                self.assertEqual(hammer(srv, connections=4, per_connection=50), [200] * 200)
                second = Server({"http": {"io_threads": 2, "accept": mode, "address": f"{HOST}:{srv.port}"}})
                self.addCleanup(second.close)
                proc = subprocess.run([BIN, "serve", "-c", second.config_path], capture_output=True, timeout=20)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                # the key named, the system's reason, nothing of the library's internals
                self.assertIn(f"http.address: cannot listen on {HOST}:{srv.port}: Address already in use",
                              proc.stderr.decode())
                self.assertNotIn("boost", proc.stderr.decode())
                # ... and the first one still has the port to itself.
                self.assertEqual(hammer(srv, connections=2, per_connection=20), [200] * 40)
                srv.stop()

    def test_max_jobs_swaps_make_no_request_wait(self):
        # One worker (loop 0's; loop 1 borrows it), hello-world requests (~0.12 ms): at ~8k req/s a worker
        # does its 500–625 jobs in less time than PHP boots here (65–95 ms), so its replacement must start
        # before the limit, by the measured boot time (Supervisor::starts_early), and the old worker serves
        # on until it is ready (never past twice its jittered limit, ≤ 2 × 625: 6000 requests need at least 5
        # workers). Over the swaps no sequential request queues for a worker.
        srv = self.start({"http": {"io_threads": 2, "pool": {"num_workers": 1, "max_jobs": 500}}})
        statuses = hammer(srv, connections=1, per_connection=6000)
        self.assertEqual(statuses, [200] * 6000)
        srv.stop()
        log = srv.stderr()
        self.assertGreaterEqual(len(re.findall(r"worker \d+ ready", log)), 1 + 4)
        self.assertIn("6000 request(s) served; 0 waited for a worker", log)

if __name__ == "__main__":
    unittest.main()
