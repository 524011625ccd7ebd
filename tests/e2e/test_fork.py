"""http.pool.fork: workers forked from a template that booted the app once (docs/protocol.md §8).

Checked against the real binary and PHP: the boot runs once, every worker is its own process (own pid,
process group, pipes, stderr, random seed) re-parented to the server, recycling and crashes fork instead
of booting, a template that dies or cannot fork never costs a request, and nothing outlives the server.
"""

import gzip
import json
import os
import re
import signal
import tempfile
import threading
import time
import unittest

from harness import HOST, PHP_DIR, children_of, metrics_address, php, probe_get, wait_until, ServerTestCase
from forkhelp import cmdline, template_pid, template_pid_after


class ForkTest(ServerTestCase):
    SCRIPT = "fork.php"

    def setUp(self):
        super().setUp()
        self.tmpdir = tempfile.TemporaryDirectory(prefix="ferry-fork-")
        self.boot_log = os.path.join(self.tmpdir.name, "boots")
        self.addCleanup(self.tmpdir.cleanup)

    def boots(self):
        try:
            with open(self.boot_log) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def fork_server(self, pool=None, env=None, script="fork.php", command=None):
        cfg = {"http": {"pool": dict({"num_workers": 2, "fork": True}, **(pool or {}))}}
        if command:
            cfg["server"] = {"command": command}
        return self.start_server(cfg, script=script, env=dict({"FERRY_TEST_BOOT_LOG": self.boot_log}, **(env or {})))

    def get(self, srv, path="/"):
        status, _, body = srv.request("GET", path)
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def distinct_workers(self, srv, n):
        """n concurrent slow requests, so that n different workers answer them: {pid: answer}."""
        results = [None] * n

        def one(i):
            status, _, body = srv.request("GET", "/sleep?ms=300")
            results[i] = json.loads(body) if status == 200 else status

        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        return {d["pid"]: d for d in results if isinstance(d, dict)}

    def test_boot_runs_once_and_workers_are_forks(self):
        srv = self.fork_server(env={"FERRY_TEST_BOOT_MS": "300"})
        tpl = template_pid(srv)
        self.assertIsNotNone(tpl, srv.stderr())
        self.assertEqual(self.boots(), [tpl], "only the template ran the boot code")
        seen = self.distinct_workers(srv, 2)
        self.assertEqual(len(seen), 2, seen)
        ferry = srv.proc.pid
        for pid, d in seen.items():
            self.assertNotEqual(pid, tpl)
            self.assertEqual(d["boot"], tpl, "state from the boot is the template's")
            self.assertEqual(d["ppid"], ferry, "re-parented to the server (child subreaper)")
            self.assertEqual(d["pgid"], pid, "its own process group")
        self.assertNotEqual(*[d["rand"] for d in seen.values()], "each fork reseeds mt_rand")
        # The template is a child of the server too, and serves nothing.
        self.assertIn(tpl, children_of(ferry))
        self.assertEqual(sorted(srv.workers()), sorted([tpl] + list(seen)))

    def test_fork_php_forks_from_php_itself_and_each_worker_boots_the_app(self):
        # fork: php with Ferry's library: a PHP-level template (docs/protocol.md §8.1), so nothing the app does
        # at boot is shared; every worker runs the boot itself, after the fork.
        srv = self.fork_server({"fork": "php", "max_jobs": 3})
        self.assertTrue(srv.wait_for_log("(PHP-level) ready: new workers are forked from it"), srv.stderr())
        self.assertNotIn("is not Ferry's library", srv.stderr(), "no app template was tried")
        tpl = template_pid(srv)
        pids = set()
        for _ in range(20):
            d = self.get(srv)
            pids.add(d["pid"])
            self.assertEqual(d["boot"], d["pid"], "each worker ran the boot itself")
            self.assertEqual(d["ppid"], srv.proc.pid, "the server's child")
        self.assertGreaterEqual(len(pids), 3, "recycled (a worker may serve past max_jobs while its replacement boots)")
        self.assertNotIn(tpl, self.boots(), "the template ran none of the worker's code")
        self.assertLessEqual(pids, set(self.boots()))
        live = []

        def two_live():  # with max_jobs 3 a worker may be between its exit and its replacement's fork
            live[:] = [(pid, cmdline(pid)) for pid in set(srv.workers()) - {tpl}]
            live[:] = [(pid, args) for pid, args in live if args]  # not one that ended meanwhile
            return len(live) >= 2
        self.assertTrue(wait_until(two_live, 5.0), (live, srv.stderr()))
        for pid, args in live:
            self.assertEqual(args, cmdline(tpl), "a fork of the template")

    def test_fork_php_needs_a_command_that_starts_php_itself(self):
        srv = self.fork_server({"fork": "php", "max_jobs": 2}, command="env php " + os.path.join(PHP_DIR, "fork.php"))
        self.assertTrue(srv.wait_for_log("no fork template (fork: php needs a command that starts php itself"),
                        srv.stderr())
        pids = set()
        for _ in range(20):
            d = self.get(srv)
            self.assertEqual(d["boot"], d["pid"], "started on its own")
            pids.add(d["pid"])
        self.assertGreaterEqual(len(pids), 3, "recycled")
        self.assertEqual(srv.stderr().count("no fork template"), 1, "said once")

    def served_by_forks(self, srv, n):
        """n requests, one after the other: the pids that answered, each a fork of the template (its boot's
        state), the server's child, in its own process group; the app booted once, in the template."""
        self.assertEqual(len(self.boots()), 1, "the app booted once")
        tpl = self.boots()[0]  # the template's PHP (its pid in the log is the command's: a shell, say)
        pids = set()
        for _ in range(n):
            d = self.get(srv)
            pids.add(d["pid"])
            self.assertEqual(d["boot"], tpl)
            self.assertEqual(d["ppid"], srv.proc.pid, "the server's child")
            self.assertEqual(d["pgid"], d["pid"])
        self.assertEqual(self.boots(), [tpl], "and not again")
        return pids

    def test_two_forks_when_one_fork_is_off(self):
        # FERRY_FORK_ONCE=0 (as where the library does not know clone(2)'s number, or the call is refused):
        # the template forks a middle process that forks the worker and dies, and the worker, re-parented to
        # the server, is the same worker as with one fork.
        srv = self.fork_server(pool={"max_jobs": 20}, env={"FERRY_FORK_ONCE": "0"})
        pids = self.served_by_forks(srv, 100)
        self.assertGreaterEqual(len(pids), 4, pids)
        self.assertNotIn("clone(CLONE_PARENT) failed", srv.stderr())

    def test_template_behind_a_shell_that_forks_it(self):
        # A wrapper script that runs php without exec (`php …; exit $?`): the template's parent is the shell,
        # so one fork would give the shell the worker. The template sees that and forks twice; the server
        # (a subreaper) adopts the worker, and nothing is lost.
        wrapper = os.path.join(self.tmpdir.name, "worker.sh")
        with open(wrapper, "w") as f:
            f.write(php("fork.php") + "\nexit $?\n")
        srv = self.fork_server(pool={"max_jobs": 20}, command="sh " + wrapper)
        boots = self.boots()
        self.assertEqual(len(boots), 1, "the app booted once")
        self.assertNotIn(boots[0], children_of(srv.proc.pid), "the template is the shell's child")
        pids = self.served_by_forks(srv, 100)
        self.assertGreaterEqual(len(pids), 4, pids)
        self.assertNotIn("not a child of this server", srv.stderr())
        self.assertNotIn("starting the worker on its own", srv.stderr())

    def test_php_with_only_the_extensions_a_template_needs(self):
        # `php -n` (no php.ini, none of Debian's conf.d extensions: no ctype, no mbstring...) plus only what
        # a fork template needs: ffi, posix, sockets (pcntl is built in). The forked worker's set-up used
        # ctype_digit(), so every fork died of a fatal error before it could serve.
        lean = "php -n -d extension=ffi -d extension=posix -d extension=sockets " + os.path.join(PHP_DIR, "fork.php")
        srv = self.fork_server(pool={"max_jobs": 20}, command=lean)
        pids = self.served_by_forks(srv, 100)
        self.assertGreaterEqual(len(pids), 4, pids)
        self.assertNotIn("Fatal error", srv.stderr())
        self.assertNotIn("cannot be a fork template", srv.stderr())

    def test_max_jobs_recycles_by_fork_without_waits(self):
        srv = self.fork_server(pool={"max_jobs": 20}, env={"FERRY_TEST_BOOT_MS": "200"})
        tpl = template_pid(srv)
        pids = self.served_by_forks(srv, 300)
        # 300 requests at 20–25 jobs per worker: well over 10 workers, every one forked, none booted.
        self.assertGreaterEqual(len(pids), 10, pids)
        self.assertEqual(template_pid(srv), tpl)
        srv.stop()
        self.assertIn("300 request(s) served; 0 waited for a worker", srv.stderr())

    def test_boot_time_of_a_forked_worker_is_its_fork_not_the_templates_boot(self):
        # The template boots the app (400 ms here) once, and the first workers are forked as soon as it is
        # ready: their boot is the fork and the handshake, milliseconds. Counting the template's boot into
        # theirs made the boot estimate 400 ms, so max_jobs replacements started hundreds of requests early
        # (and served beside the worker they replace for as long) until it decayed, ~20 swaps later.
        srv = self.start_server(
            {"metrics": {"address": f"{HOST}:0"}, "logs": {"level": "debug"},
             "http": {"pool": {"num_workers": 2, "fork": True, "max_jobs": 40}}},
            script="fork.php", env={"FERRY_TEST_BOOT_LOG": self.boot_log, "FERRY_TEST_BOOT_MS": "400"})
        for _ in range(400):
            self.get(srv)
        estimates = [int(m) for m in re.findall(r"boots take ~(\d+) ms\): its replacement starts now", srv.stderr())]
        self.assertGreaterEqual(len(estimates), 5, srv.stderr())
        self.assertLess(max(estimates), 200, estimates)
        status, _, body = probe_get(metrics_address(srv), "/metrics")
        self.assertEqual(status, 200, body)
        count = float(re.search(r'^ferry_pool_worker_boot_seconds_count\{pool="http"\} (\S+)$', body, re.M).group(1))
        buckets = sorted((float(le), float(n)) for le, n in re.findall(
            r'^ferry_pool_worker_boot_seconds_bucket\{pool="http",le="([0-9.e+-]+)"\} (\S+)$', body, re.M))
        within = [n for le, n in buckets if le >= 0.2]
        self.assertTrue(within, body)
        self.assertGreaterEqual(count, 10, body)
        self.assertEqual(within[0], count, "every forked worker booted in well under the template's 400 ms")
        self.assertEqual(self.boots(), [template_pid(srv)])

    def test_crash_is_502_and_replaced_by_a_fork(self):
        srv = self.fork_server(pool={"num_workers": 1})
        tpl = template_pid(srv)
        first = self.get(srv)["pid"]
        status, _, _ = srv.request("GET", "/exit")
        self.assertEqual(status, 502)
        self.assertTrue(srv.wait_for_log(f"worker {first} exited with code 3"), srv.stderr())
        d = self.get(srv)
        self.assertNotEqual(d["pid"], first)
        self.assertEqual(d["boot"], tpl)
        self.assertEqual(self.boots(), [tpl])

    def test_forked_worker_has_its_own_stderr(self):
        srv = self.fork_server(pool={"num_workers": 1})
        pid = self.get(srv, "/stderr")["pid"]
        # Tagged with the worker's own pid: fd 2 is its own pipe, not the template's.
        self.assertTrue(srv.wait_for_log(f"pid {pid}: forked worker stderr {pid}"), srv.stderr())

    def test_template_killed_is_replaced_and_no_request_fails(self):
        srv = self.fork_server(pool={"max_jobs": 5})
        tpl = template_pid(srv)
        os.kill(tpl, signal.SIGKILL)
        self.assertTrue(srv.wait_for_log(f"template {tpl} killed by signal 9"), srv.stderr())
        # Recycling goes on (workers started on their own while no template is up), then a new template.
        for _ in range(60):
            self.get(srv)
        self.assertTrue(wait_until(lambda: template_pid_after(srv, tpl), 10), srv.stderr())
        new = template_pid_after(srv, tpl)
        for _ in range(30):
            self.get(srv)
        self.assertIn(new, self.boots())

    def test_stop_leaves_nothing(self):
        srv = self.fork_server(pool={"max_jobs": 3})
        for _ in range(20):
            self.get(srv)
        tpl = template_pid(srv)
        srv.stop()  # asserts exit 0 and that no process with the server's marker is left
        self.assertIn(f"template {tpl}", srv.stderr())

    def test_server_killed_takes_forked_workers_with_it(self):
        srv = self.fork_server()
        self.distinct_workers(srv, 2)
        self.assertEqual(len(srv.workers()), 3)  # template + 2 workers
        srv.proc.kill()
        srv.proc.wait(5)
        # PR_SET_PDEATHSIG: the template (our child) and the forked workers (re-parented to us) die with us.
        self.assertTrue(wait_until(lambda: not srv.workers(), 5), srv.workers())

    def test_concurrent_requests_while_recycling(self):
        srv = self.fork_server(pool={"max_jobs": 10, "num_workers": 3})
        errors, done = [], []

        def client():
            conn = srv.conn()
            try:
                for _ in range(80):
                    conn.request("GET", "/sleep?ms=1")
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200:
                        errors.append(r.status)
                done.append(1)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
            finally:
                conn.close()

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        self.assertEqual(len(done), 6)
        self.assertEqual(len(self.boots()), 1)

    # -- http.pool.fork_fast_exit ------------------------------------------------------------------

    def stopped_worker_exit(self, pool=None, endob=False, fatal=""):
        """One worker sets up /exit-hooks, then is stopped by max_jobs: (its pid, the hooks' log lines, its
        session file's content, the server's log)."""
        hooks = os.path.join(self.tmpdir.name, "hooks")
        sessions = os.path.join(self.tmpdir.name, "sessions")
        os.mkdir(sessions)
        srv = self.start_server(
            {"http": {"pool": dict({"num_workers": 1, "fork": True, "max_jobs": 2}, **(pool or {}))},
             "logs": {"level": "debug"}},
            script="fork.php")
        query = (f"/exit-hooks?log={hooks}&session={sessions}" + ("&endob=1" if endob else "")
                 + (f"&fatal={fatal}" if fatal else ""))
        pid = self.get(srv, query)["pid"]
        # The worker serves on while its replacement is forked (never past twice its limit): ask until a new
        # one answers.
        replaced = False
        for _ in range(50):
            if self.get(srv)["pid"] != pid:
                replaced = True
                break
            time.sleep(0.05)
        self.assertTrue(replaced, "max_jobs: 2 replaced the worker")
        self.assertTrue(srv.wait_for_log(f"worker {pid} exited", 10), srv.stderr())
        log = srv.stderr()
        with open(hooks) as f:
            lines = f.read().splitlines()
        with open(os.path.join(sessions, f"sess_w{pid}")) as f:
            session = f.read()
        return pid, lines, session, log

    def assert_request_shutdown_ran(self, pid, lines, log):
        self.assertEqual(sorted(lines), sorted([f"shutdown {pid}", f"destruct-cycle {pid}",
                                                f"destruct-cycle {pid}", f"destruct-static {pid}"]))
        self.assertEqual(lines[0], f"shutdown {pid}", "shutdown functions run before destructors")
        self.assertIn(f"pid {pid}: buffered output {pid}", log, "the open output buffer was flushed")
        self.assertIn(f"worker {pid} exited with code 0", log)
        # A stream that buffers (zlib) and was never closed loses nothing: closed before the process ends.
        with gzip.open(os.path.join(self.tmpdir.name, "hooks.gz"), "rt") as f:
            self.assertEqual(f.read(), f"gz line {pid}\n")

    def test_fast_exit_runs_request_shutdown_and_skips_the_engine_teardown(self):
        pid, lines, session, log = self.stopped_worker_exit()
        self.assert_request_shutdown_ran(pid, lines, log)
        # The session extension writes an open session in its request-shutdown hook, after the output
        # buffers: the fast exit ends the process before it (what docs/protocol.md §8 says it skips).
        self.assertEqual(session, "", "the engine's request teardown did not run")

    def test_fast_exit_off_runs_the_whole_teardown(self):
        pid, lines, session, log = self.stopped_worker_exit(pool={"fork_fast_exit": False})
        self.assert_request_shutdown_ran(pid, lines, log)
        self.assertEqual(session, f"pid|i:{pid};")

    def test_fast_exit_falls_back_when_a_destructor_closes_the_output_buffers(self):
        # The guard buffer ended by application code (not by PHP's shutdown) must not end the process:
        # the destructors after that one still run, and so does the whole teardown.
        pid, lines, session, log = self.stopped_worker_exit(endob=True)
        self.assert_request_shutdown_ran(pid, lines, log)
        self.assertEqual(session, f"pid|i:{pid};")

    def test_fast_exit_keeps_the_status_of_a_fatal_error(self):
        pid, lines, session, log = self.stopped_worker_exit(fatal="1")
        self.assertIn(f"shutdown {pid}", lines)
        self.assertIn("fatal in a shutdown function", log)
        self.assertIn(f"worker {pid} exited with code 255", log, "not turned into a clean exit")

    def test_fast_exit_not_taken_after_a_fatal_error_past_the_loop(self):
        # The shutdown functions (the fast exit's included) run after a fatal error: it must see the error,
        # keep the status and leave the teardown to PHP.
        pid, lines, session, log = self.stopped_worker_exit(fatal="after")
        self.assertIn(f"shutdown {pid}", lines)
        self.assertIn("fatal after the loop", log)
        self.assertIn(f"worker {pid} exited with code 255", log, "not turned into a clean exit")
        self.assertEqual(session, f"pid|i:{pid};", "the whole teardown ran")


if __name__ == "__main__":
    unittest.main()
