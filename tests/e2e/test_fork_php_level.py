"""http.pool.fork with a PHP-level template (docs/protocol.md §8.1): a worker that is not Ferry's library forked
from PHP itself, with opcache; and the fall-backs when there can be no template."""

import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from harness import PHP_DIR, wait_until, Server, ServerTestCase
from forkhelp import OPCACHE, cmdline, parent_of, template_pid, template_pid_after


class PhpLevelTemplateTest(ServerTestCase):
    """fork: true with a worker that is not Ferry's library (tests/php/rr_worker.php speaks the pipes as
    RoadRunner's packages do): new workers are forks of a PHP started with prefork.php prepended, which ran no
    worker code (docs/protocol.md §8.1), and each runs the worker script from its first line."""
    SCRIPT = "rr_worker.php"
    RR = os.path.join(PHP_DIR, "rr_worker.php")

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory(prefix="ferry-prefork-")
        self.addCleanup(self.tmp.cleanup)

    def rr_server(self, pool=None, command=None):
        cfg = {"http": {"pool": dict({"num_workers": 2, "fork": True}, **(pool or {}))}}
        if command:
            cfg["server"] = {"command": command}
        return self.start_server(cfg, script="rr_worker.php")

    def globals(self, srv):
        status, _, body = srv.request("GET", "/globals")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def assert_forks_of(self, srv, tpl):
        """Every live worker is a fork of the template (its argv, with the prepend) and the server's child
        (with max_jobs, a replacement started early and a retired worker ending may be there too)."""
        workers = [(p, cmdline(p), parent_of(p)) for p in srv.workers() if p != tpl]
        workers = [w for w in workers if w[1] and w[2]]  # not one that ended meanwhile (max_jobs)
        self.assertGreaterEqual(len(workers), 2, (workers, srv.stderr()))
        for _, args, parent in workers:
            self.assertEqual(args, cmdline(tpl), "a fork of the template, not a PHP started anew")
            self.assertEqual(parent, srv.proc.pid)

    def test_workers_are_forks_of_a_php_level_template(self):
        srv = self.rr_server({"max_jobs": 3})
        self.assertTrue(srv.wait_for_log("(PHP-level) ready: new workers are forked from it"), srv.stderr())
        self.assertIn("is not Ferry's library; new workers are forked from a PHP-level template", srv.stderr())
        tpl = template_pid(srv)
        args = cmdline(tpl)
        self.assertEqual(args[1], "-d", args)
        self.assertTrue(args[2].startswith("auto_prepend_file="), args)
        self.assertEqual(args[3:], [self.RR])
        shim = args[2].split("=", 1)[1]
        self.assertTrue(os.path.isfile(shim), shim)
        self.assertEqual(os.stat(os.path.dirname(shim)).st_mode & 0o777, 0o700)
        self.assert_forks_of(srv, tpl)
        time.sleep(1.2)  # the workers forked from now on start 1.2 s after the first ones
        seen = {}
        for _ in range(30):
            d = self.globals(srv)
            seen.setdefault(d["pid"], d)
        self.assertGreaterEqual(len(seen), 6, "max_jobs: 3 on 2 workers over 30 requests (some past it)")
        for d in seen.values():
            self.assertTrue(d["global"], "the script's top-level variables are globals")
            self.assertEqual((d["script"], d["argv"]), (self.RR, [self.RR]))
            self.assertFalse(d["library"], "prefork.php's classes do not stand in for Ferry's library")
        times = [d["requestTime"] for d in seen.values()]
        self.assertGreater(max(times) - min(times), 1.0, "REQUEST_TIME is the fork's, not the template's")
        self.assertGreaterEqual(len({d["rand"] for d in seen.values()}), len(seen) - 1, "mt_rand reseeded")
        self.assertEqual(template_pid(srv), tpl, "one template for all of them")
        self.assertNotIn("unexpectedly", srv.stderr())
        self.assert_forks_of(srv, tpl)
        srv.stop()
        self.assertFalse(os.path.exists(os.path.dirname(shim)), "the server removes prefork.php at exit")

    def test_forks_share_what_opcache_compiled(self):
        # Each fork requires the script anew: with opcache in the CLI it finds it in the template's shared
        # memory, compiled by the first fork (an exec'd worker has a shared memory of its own).
        srv = self.rr_server({"max_jobs": 2}, command="php " + OPCACHE + " " + self.RR)
        self.assertTrue(srv.wait_for_log("(PHP-level) ready"), srv.stderr())
        hits = {}
        for _ in range(30):
            d = self.globals(srv)
            hits[d["pid"]] = d["opcacheHits"]
        self.assertGreaterEqual(len(hits), 6, hits)
        self.assertGreaterEqual(max(hits.values()), 4, ("hits grow from fork to fork", hits))
        exec_srv = self.start_server({"server": {"command": "php " + OPCACHE + " " + self.RR},
                                      "http": {"pool": {"num_workers": 2, "max_jobs": 2}}}, script="rr_worker.php")
        own = {}
        for _ in range(20):
            d = self.globals(exec_srv)
            own[d["pid"]] = d["opcacheHits"]
        self.assertLessEqual(max(own.values()), 1, ("an exec'd worker's opcache is its own", own))

    def test_a_reset_starts_a_new_php_level_template(self):
        srv = self.rr_server()
        self.assertTrue(srv.wait_for_log("(PHP-level) ready"), srv.stderr())
        old = template_pid(srv)
        before = set(srv.workers()) - {old}
        srv.proc.send_signal(signal.SIGHUP)
        self.assertTrue(srv.wait_for_log("rolling reset (SIGHUP) done", 10), srv.stderr())
        status, _, _ = srv.request("GET", "/")
        self.assertEqual(status, 200)
        tpl = template_pid_after(srv, old)
        self.assertIsNotNone(tpl, srv.stderr())
        self.assertTrue(wait_until(lambda: not (set(srv.workers()) & before), 5), srv.workers())
        self.assert_forks_of(srv, tpl)
        self.assertEqual(srv.stderr().count("is not Ferry's library"), 1, "learnt once")

    def test_a_command_that_does_not_start_php_itself_starts_each_worker(self):
        srv = self.rr_server({"max_jobs": 2}, command="env php " + self.RR)
        self.assertTrue(srv.wait_for_log("the command does not start php itself"), srv.stderr())
        pids = {self.globals(srv)["pid"] for _ in range(20)}
        self.assertGreaterEqual(len(pids), 3, "recycled (a worker may serve past max_jobs while its replacement boots)")
        self.assertNotIn("(PHP-level) ready", srv.stderr())
        for pid in srv.workers():
            self.assertNotIn("-d", cmdline(pid), "started as configured")

    def test_php_that_cannot_fork_starts_each_worker(self):
        srv = self.rr_server({"max_jobs": 2}, command="php -d ffi.enable=0 " + self.RR)
        self.assertTrue(srv.wait_for_log("cannot be a fork template (FFI cannot load libc"), srv.stderr())
        self.assertIn("is not Ferry's library", srv.stderr(), "it was tried")
        pids = {self.globals(srv)["pid"] for _ in range(20)}
        self.assertGreaterEqual(len(pids), 3, "recycled (a worker may serve past max_jobs while its replacement boots)")
        self.assertEqual(srv.stderr().count("cannot be a fork template"), 1, "said once")

    def test_prefork_php_that_cannot_be_written_starts_each_worker(self):
        # A $TMPDIR that does not exist (the uploads' directory is set apart: ferry checks it at start).
        srv = Server({"http": {"pool": {"num_workers": 2, "fork": True, "max_jobs": 2},
                               "uploads": {"dir": self.tmp.name}}}, script="rr_worker.php",
                     prefix=["env", "TMPDIR=" + os.path.join(self.tmp.name, "missing")])
        self.addCleanup(srv.close)
        srv.start()
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        self.assertTrue(srv.wait_for_log("no fork template (cannot start a PHP-level template: cannot write the "
                                         "PHP-level fork template: cannot create a directory like " + self.tmp.name),
                        srv.stderr())
        pids = {self.globals(srv)["pid"] for _ in range(20)}
        self.assertGreaterEqual(len(pids), 3, "recycled")
        self.assertEqual(srv.stderr().count("cannot start a PHP-level template"), 1, "said once")

    def test_prefork_php_that_php_may_not_open_starts_each_worker(self):
        # open_basedir keeps PHP out of the directory prefork.php was written to: the template fails before any
        # handshake (not the worker's boot failure: the worker itself runs), and forking is off.
        srv = self.rr_server({"max_jobs": 2}, command="php -d open_basedir=" + PHP_DIR + " " + self.RR)
        self.assertTrue(srv.wait_for_log("no fork template (template "), srv.stderr())
        self.assertIn("failed to boot", srv.stderr())
        self.assertIn("open_basedir restriction in effect", srv.stderr(), "PHP's own words, from its stderr")
        pids = {self.globals(srv)["pid"] for _ in range(20)}
        self.assertGreaterEqual(len(pids), 3, "recycled, each worker started on its own")
        self.assertEqual(srv.stderr().count("no fork template"), 1, "said once")
        self.assertNotIn("cannot start workers", srv.stderr())

    def test_a_command_with_its_own_prepend_starts_each_worker(self):
        own = os.path.join(self.tmp.name, "own_prepend.php")
        with open(own, "w") as f:
            f.write("<?php\n")
        srv = self.rr_server(command="php -d auto_prepend_file=" + own + " " + self.RR)
        self.assertTrue(srv.wait_for_log("does the command set auto_prepend_file itself?"), srv.stderr())
        for _ in range(4):
            self.assertEqual(srv.request("GET", "/")[0], 200)


class ForkFallbackTest(ServerTestCase):
    SCRIPT = "fork.php"

    def test_without_ffi_workers_are_started_on_their_own(self):
        srv = self.start_server({"server": {"command": "php -d ffi.enable=0 " + os.path.join(PHP_DIR, "fork.php")},
                                 "http": {"pool": {"num_workers": 1, "fork": True, "max_jobs": 3}}})
        self.assertTrue(srv.wait_for_log("cannot be a fork template (FFI cannot load libc"), srv.stderr())
        pids = set()
        for _ in range(40):
            status, _, body = srv.request("GET", "/sleep?ms=2")
            self.assertEqual(status, 200)
            d = json.loads(body)
            self.assertEqual(d["boot"], d["pid"], "booted by itself")
            pids.add(d["pid"])
        self.assertGreaterEqual(len(pids), 3)
        self.assertEqual(srv.stderr().count("cannot be a fork template"), 1, "said once")

    def bad_template(self, mode, env=None):
        srv = Server({"http": {"pool": {"num_workers": 2, "fork": True}}}, script="bad_template.php",
                     env=dict({"FERRY_TEST_BAD_TEMPLATE": mode}, **(env or {})))
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        srv.start(timeout=40)  # a template that hangs costs the first spawn up to 10 s
        for _ in range(10):
            status, _, body = srv.request("GET", "/")
            self.assertEqual(status, 200, (body, srv.stderr()))
            self.assertTrue(body.startswith(b"pid "), body)
        return srv

    def test_template_that_never_answers_is_killed_and_workers_start_anyway(self):
        srv = self.bad_template("hang")
        self.assertIn("no answer to a fork command", srv.stderr())
        self.assertIn("new workers start without it", srv.stderr())

    def test_template_answering_a_pid_that_is_not_ours_is_refused(self):
        bystander = subprocess.Popen(["sleep", "60"])
        self.addCleanup(lambda: (bystander.kill(), bystander.wait()))
        srv = self.bad_template("foreign", {"FERRY_TEST_FOREIGN_PID": str(bystander.pid)})
        self.assertIn(f"answered pid {bystander.pid}, which is not a child of this server", srv.stderr())
        srv.stop()
        self.assertIsNone(bystander.poll(), "the server signalled a process that is not its worker")

    def test_template_writing_garbage_is_killed(self):
        srv = self.bad_template("garbage")
        self.assertTrue(wait_until(lambda: "this is not a frame" in srv.stderr(), 5), srv.stderr())

    def test_boot_failure_with_fork_is_a_clear_error(self):
        srv = Server({"http": {"pool": {"num_workers": 1, "fork": True}}}, script="boot_fail.php")
        self.addCleanup(srv.close)
        self.addCleanup(srv.kill)
        with self.assertRaises(AssertionError):
            srv.start(timeout=10)
        self.assertIn("failed to boot", srv.stderr())
        self.assertTrue(wait_until(lambda: not srv.workers(), 5), srv.workers())


if __name__ == "__main__":
    unittest.main()
