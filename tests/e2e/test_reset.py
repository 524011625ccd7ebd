"""Rolling reset and worker control without a file watcher (rpc.listen, SIGHUP, `ferry reset` and `ferry
workers`): the real binary, real PHP workers, clients sending requests throughout."""

import json
import os
import signal
import socket
import stat
import subprocess
import threading
import time
import unittest

from harness import BIN, Rpc, goridge_frame, read_goridge_frame, wait_until
from reloadcase import ReloadCase


class ResetTest(ReloadCase):
    def test_sighup_resets_every_worker(self):
        srv = self.serve(reload=False)
        before = set(srv.workers())
        self.write("version.php", "<?php return 'v2';\n")
        srv.proc.send_signal(signal.SIGHUP)
        self.assertTrue(srv.wait_for_log("rolling reset (SIGHUP) done", 10), srv.stderr())
        self.assertEqual(self.version(srv), "v2")
        self.assertFalse(before & set(srv.workers()))

    def test_a_worker_booting_when_a_reset_begins_exits_as_the_resets(self):
        # max_jobs 1 and a slow boot: after a request, its worker's replacement is still booting (old code)
        # when the reset begins; it is retired once ready, and its exit is counted as the reset's (it was
        # counted as cause="worker_stop", as if the worker had asked to stop)
        from harness import scrape
        self.write("version.php", "<?php usleep(700000); return 'v1';\n")
        srv = self.serve(reload=False, pool={"num_workers": 1, "max_jobs": 1},
                         extra={"metrics": {"address": "127.0.0.1:0"}})
        self.assertEqual(self.version(srv), "v1")
        time.sleep(0.2)  # its replacement boots (700 ms)
        self.write("version.php", "<?php return 'v2';\n")
        srv.proc.send_signal(signal.SIGHUP)
        self.assertTrue(srv.wait_for_log("rolling reset (SIGHUP) done", 10), srv.stderr())
        self.assertEqual(self.version(srv), "v2")

        def exits(cause):
            key = ("ferry_pool_worker_restarts_total", frozenset({("pool", "http"), ("cause", cause)}))
            return scrape(srv).get(key, 0)
        self.assertTrue(wait_until(lambda: exits("reset") >= 2, 5.0), (exits("reset"), srv.stderr()))
        self.assertEqual(exits("worker_stop"), 0, srv.stderr())

    def test_overlapping_resets_coalesce_under_load_with_max_jobs(self):
        sock = os.path.join(self.tmp.name, "rpc.sock")
        srv = self.serve(reload=False, pool={"num_workers": 3, "max_jobs": 15},
                         rpc={"listen": "unix://" + sock})
        stop = threading.Event()
        bad, ok = [], [0]

        def client():
            conn = srv.conn()
            try:
                while not stop.is_set():
                    conn.request("GET", "/")
                    r = conn.getresponse()
                    r.read()
                    if r.status == 200:
                        ok[0] += 1
                    else:
                        bad.append(r.status)
            except Exception as e:  # noqa: BLE001 - a failure
                bad.append(repr(e))
            finally:
                conn.close()

        load = [threading.Thread(target=client) for _ in range(3)]
        for t in load:
            t.start()
        self.write("version.php", "<?php return 'v2';\n")
        answers = []

        def reset():
            rpc = Rpc("unix://" + sock)
            try:
                answers.append(rpc.call("resetter.Reset", "http"))
            finally:
                rpc.close()

        resets = [threading.Thread(target=reset) for _ in range(3)]
        for t in resets:
            t.start()
        srv.proc.send_signal(signal.SIGHUP)
        for t in resets:
            t.join(60)
        time.sleep(0.3)
        stop.set()
        for t in load:
            t.join(20)
        self.assertFalse([t for t in resets + load if t.is_alive()], srv.stderr())
        self.assertEqual(answers, [(True, True)] * 3)
        self.assertEqual(bad, [], srv.stderr())
        self.assertGreater(ok[0], 50)
        self.assertEqual(self.version(srv), "v2")
        self.assertTrue(wait_until(lambda: len(srv.workers()) == 3, 5), srv.workers())

    def test_reset_timeout_kills_a_busy_worker_with_503(self):
        srv = self.serve(reload=False, pool={"num_workers": 1, "reset_timeout": "1s"})
        results = {}

        def slow():
            results["slow"] = srv.request("GET", "/sleep?ms=6000", timeout=20)

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGHUP)
        t.join(20)
        status, headers, _ = results["slow"]
        self.assertEqual(status, 503)
        self.assertIn("retry-after", {k.lower() for k, _ in headers})
        self.assertTrue(srv.wait_for_log("reset_timeout", 5), srv.stderr())
        self.assertTrue(srv.wait_for_log("1 killed at reset_timeout", 5), srv.stderr())
        self.assertEqual(self.version(srv), "v1")


class RpcTest(ReloadCase):
    def rpc_server(self, **kw):
        self.sock_path = os.path.join(self.tmp.name, "rpc.sock")
        return self.serve(reload=False, rpc={"listen": "unix://" + self.sock_path}, **kw)

    def cli(self, srv, *args, timeout=30):
        return subprocess.run([BIN, *args, "-c", srv.config_path], capture_output=True, text=True,
                              timeout=timeout, cwd=srv.tmp.name)

    def test_informer_and_resetter(self):
        srv = self.rpc_server()
        self.assertEqual(stat.S_IMODE(os.stat(self.sock_path).st_mode), 0o600)
        rpc = Rpc("unix://" + self.sock_path)
        self.addCleanup(rpc.close)
        self.assertEqual(rpc.call("informer.List", True), (True, ["http"]))
        self.assertEqual(rpc.call("resetter.List", True), (True, ["http"]))
        ok, res = rpc.call("informer.Workers", "http")
        self.assertTrue(ok, res)
        pids = sorted(w["pid"] for w in res["workers"])
        self.assertEqual(pids, srv.workers())
        w = res["workers"][0]
        for key in ("pid", "status", "numExecs", "created", "memoryUsage", "CPUPercent", "command", "statusStr"):
            self.assertIn(key, w)
        # Ferry's own: the CPU each worker is pinned to (cpu_affinity: auto), -1 when not pinned.
        for w2 in res["workers"]:
            pinned = w2["pinnedCpu"]
            if pinned >= 0:
                self.assertEqual(sorted(os.sched_getaffinity(w2["pid"])), [pinned])
            else:
                self.assertLess(len(os.sched_getaffinity(0)), 2)  # auto pins 2 workers on 2+ CPUs
        self.assertGreater(w["memoryUsage"], 1 << 20)
        self.assertIn("versioned.php", w["command"])
        # A bad method: an error answer, and the connection stays usable.
        ok, err = rpc.call("resetter.Nope", "http")
        self.assertFalse(ok)
        self.assertIn('unknown method "resetter.Nope"', err)
        ok, err = rpc.call("informer.Workers", "grpc")
        self.assertFalse(ok)
        self.assertIn('no plugin "grpc"', err)
        self.write("version.php", "<?php return 'v2';\n")
        self.assertEqual(rpc.call("resetter.Reset", "http"), (True, True))
        self.assertEqual(self.version(srv), "v2")
        self.assertFalse(set(pids) & set(srv.workers()))

    def test_malformed_frames_close_the_connection_only(self):
        srv = self.rpc_server()
        for junk in (b"GET / HTTP/1.1\r\n\r\n", goridge_frame(0x08, b"xx", (1,)), goridge_frame(0x08, b"ab", (1, 9))):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            s.connect(self.sock_path)
            s.sendall(junk)
            self.assertEqual(s.recv(100), b"")  # closed
            s.close()
        self.assertTrue(srv.wait_for_log("not an RPC frame", 5), srv.stderr())
        rpc = Rpc("unix://" + self.sock_path)
        self.addCleanup(rpc.close)
        self.assertTrue(rpc.call("informer.List", True)[0])
        self.assertEqual(self.version(srv), "v1")

    def test_connections_are_capped_and_a_new_caller_gets_in(self):
        # 64 connections that say nothing: the 65th is served, the oldest silent one is closed for it
        # (issue 41; tests/e2e/test_control_plane.py has the rest).
        srv = self.rpc_server()
        held = []
        for _ in range(64):
            s = socket.socket(socket.AF_UNIX)
            s.connect(self.sock_path)
            held.append(s)
        self.addCleanup(lambda: [s.close() for s in held])
        rpc = Rpc("unix://" + self.sock_path)
        self.addCleanup(rpc.close)
        self.assertTrue(rpc.call("informer.List", True)[0])
        held[0].settimeout(5)
        self.assertEqual(held[0].recv(10), b"")  # the oldest is closed
        self.assertTrue(srv.wait_for_log("64 connections are open: closed the oldest idle one"), srv.stderr())
        self.assertEqual(self.version(srv), "v1")

    def test_msgpack_codec_is_refused_clearly(self):
        self.rpc_server()
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock_path)
        self.addCleanup(s.close)
        s.sendall(goridge_frame(0x10, b"informer.List\xc3", (7, 13)))
        flags, options, payload = read_goridge_frame(s)
        self.assertTrue(flags & 0x40)
        self.assertIn(b"speaks JSON", payload)

    def test_cli_workers_reset_stop(self):
        srv = self.rpc_server()
        r = self.cli(srv, "workers")
        self.assertEqual(r.returncode, 0, r.stderr)
        for pid in srv.workers():
            self.assertIn(str(pid), r.stdout)
        self.assertIn("STATE", r.stdout)
        self.assertRegex(r.stdout.splitlines()[0], r"LOOP +CPU% +PIN$")
        r = self.cli(srv, "workers", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(w["pid"] for w in json.loads(r.stdout)["workers"]), srv.workers())
        before = set(srv.workers())
        self.write("version.php", "<?php return 'v2';\n")
        r = self.cli(srv, "reset")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.version(srv), "v2")
        self.assertFalse(before & set(srv.workers()))
        r = self.cli(srv, "reset", "jobs")
        self.assertEqual(r.returncode, 1)
        self.assertIn('no plugin "jobs"', r.stderr)
        r = self.cli(srv, "stop")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(srv.proc.wait(15), 0)
        self.assertFalse(os.path.exists(self.sock_path))

    def test_roadrunners_php_rpc_client(self):
        """Spiral\\Goridge\\RPC\\RPC's framing, as tests/php/rr_rpc_client.php reproduces it."""
        srv = self.rpc_server()
        before = srv.workers()
        self.write("version.php", "<?php return 'v2';\n")
        fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "php", "rr_rpc_client.php")
        r = subprocess.run(["php", fixture, "unix://" + self.sock_path,
                            "informer.List", "true", "informer.Workers", '"http"', "resetter.Reset", '"http"',
                            "nope.Method", '"x"', "resetter.List", "true"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], 'ok ["http"]')
        self.assertEqual(sorted(w["pid"] for w in json.loads(lines[1][3:])["workers"]), before)
        self.assertEqual(lines[2], "ok true")
        self.assertTrue(lines[3].startswith('error unknown method "nope.Method"'), lines[3])
        self.assertEqual(lines[4], 'ok ["http"]')  # the connection survived the error
        self.assertEqual(self.version(srv), "v2")

    def test_php_client_from_a_worker(self):
        srv = self.rpc_server()
        status, _, body = srv.request("GET", "/rpc")
        self.assertEqual(status, 200, body)
        self.assertEqual(sorted(w["pid"] for w in json.loads(body)), srv.workers())

    def test_cli_without_rpc_or_server(self):
        srv = self.serve(reload=False)
        r = self.cli(srv, "workers")
        self.assertEqual(r.returncode, 1)
        self.assertIn("has no rpc.listen", r.stderr)
        gone = os.path.join(self.tmp.name, "gone.yaml")
        with open(gone, "w") as f:
            f.write(f'version: "3"\nserver:\n  command: php x.php\nrpc:\n  listen: unix://{self.tmp.name}/none.sock\n')
        r = subprocess.run([BIN, "workers", "-c", gone], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot reach the server", r.stderr)

    def test_remote_tcp_needs_allow_remote(self):
        cfg_path = os.path.join(self.tmp.name, "remote.yaml")
        with open(cfg_path, "w") as f:
            f.write('version: "3"\nserver:\n  command: "php -r sleep(1);"\nhttp:\n  address: 127.0.0.1:0\n'
                    'rpc:\n  listen: tcp://0.0.0.0:0\n')
        r = subprocess.run([BIN, "serve", "-c", cfg_path], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 1)
        self.assertIn("rpc.listen", r.stderr)
        self.assertIn("rpc.allow_remote", r.stderr)

    def test_tcp_listener_and_rr_rpc(self):
        srv = self.serve(reload=False, rpc={"listen": "tcp://127.0.0.1:0"})
        self.assertTrue(srv.wait_for_log("rpc: listening on"), srv.stderr())
        addr = [l for l in srv.stderr().splitlines() if "rpc: listening on" in l][0].split("listening on ")[1]
        rpc = Rpc(addr.strip())
        self.addCleanup(rpc.close)
        self.assertTrue(rpc.call("informer.Workers", "http")[0])
        status, _, body = srv.request("GET", "/rpc")  # the workers got RR_RPC with the bound port
        self.assertEqual(status, 200, body)


if __name__ == "__main__":
    unittest.main()
