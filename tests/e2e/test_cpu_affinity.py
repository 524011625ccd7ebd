"""http.pool.cpu_affinity: with `auto` (the default), at least two usable CPUs and no more workers than CPUs,
each worker is pinned to one CPU once its boot is done, spread over the CPUs ferry may run on (taskset
counts); a max_jobs replacement takes the CPU of the worker it replaces, with one loop or several; more
workers than CPUs, or `off`, leave them where the scheduler puts them; with workers pinned,
recycle_priority: auto boots replacements at normal priority."""

import os
import re
import shutil
import unittest

from harness import E2E_PHP_DIR, Server, wait_until

SCRIPT = os.path.join(E2E_PHP_DIR, "priority.php")  # answers with its pid
USABLE = sorted(os.sched_getaffinity(0))


def cpus_of(pid):
    try:
        return sorted(os.sched_getaffinity(pid))
    except ProcessLookupError:
        return None


def config(num_workers=2, **pool):
    return {"http": {"pool": dict({"num_workers": num_workers}, **pool)}, "logs": {"level": "debug"}}


def pins(srv):
    """The live workers' CPU sets, once each one is pinned (or after 5 s): {pid: [cpus]}."""
    def get():
        return {pid: cpus_of(pid) for pid in srv.workers()}
    wait_until(lambda: all(c is not None and len(c) == 1 for c in get().values()), 5.0)
    return get()


@unittest.skipUnless(len(USABLE) >= 2, "needs two usable CPUs")
class Pinned(unittest.TestCase):
    def test_workers_are_spread_one_per_cpu_and_the_log_says_so(self):
        with Server(config(), script=SCRIPT) as srv:
            got = pins(srv)
            self.assertEqual(len(got), 2, got)
            self.assertEqual(sorted(c[0] for c in got.values()), USABLE[:2], got)
            cpus = ",".join(str(c) for c in USABLE)
            self.assertIn(f"workers pinned one per CPU once booted (http.pool.cpu_affinity: auto): 2 on CPUs {cpus}",
                          srv.stderr())
            for pid in got:
                self.assertRegex(srv.stderr(), rf"worker {pid} pinned to CPU {got[pid][0]}\b")
            # Served while pinned.
            status, _, body = srv.request("GET", "/")
            self.assertEqual(status, 200)
            self.assertIn(int(body), got)

    @unittest.skipUnless(shutil.which("taskset"), "needs taskset")
    def test_only_the_cpus_ferry_may_run_on(self):
        allowed = USABLE[-2:]
        with Server(config(), script=SCRIPT, prefix=["taskset", "-c", ",".join(map(str, allowed))]) as srv:
            got = pins(srv)
            self.assertEqual(sorted(c[0] for c in got.values()), allowed, got)

    def test_a_max_jobs_replacement_takes_the_cpu_it_frees(self):
        # Sequential requests recycle a worker every 3: after each burst the two serving workers are on the
        # two CPUs, never both on one.
        with Server(config(max_jobs=3), script=SCRIPT) as srv:
            seen = set()
            for burst in range(6):
                for _ in range(7):
                    status, _, body = srv.request("GET", "/")
                    self.assertEqual(status, 200)
                    seen.add(int(body))
                self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 5.0), srv.workers())
                got = pins(srv)
                self.assertEqual(sorted(c[0] for c in got.values() if c), USABLE[:2], (burst, got))
            self.assertGreater(len(seen), 6, "workers were recycled")
            log = srv.stderr()
            pinned = re.findall(r"worker (\d+) pinned to CPU (\d+)", log)
            self.assertGreaterEqual(len(pinned), len(seen))
            self.assertTrue(all(int(c) in USABLE[:2] for _, c in pinned), pinned)

    def test_several_loops_share_one_spread(self):
        cfg = config(max_jobs=4)
        cfg["http"]["io_threads"] = 2
        with Server(cfg, script=SCRIPT) as srv:
            got = pins(srv)
            self.assertEqual(sorted(c[0] for c in got.values()), USABLE[:2], got)
            for _ in range(20):
                self.assertEqual(srv.request("GET", "/")[0], 200)
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 5.0))
            got = pins(srv)
            self.assertEqual(sorted(c[0] for c in got.values()), USABLE[:2], got)

    def test_the_http_and_websockets_pools_share_one_spread(self):
        cfg = config(num_workers=1)
        cfg["websockets"] = {"path": "/ws", "pool": {"num_workers": 1}}
        with Server(cfg, script="ws.php") as srv:
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 10.0), srv.workers())
            got = pins(srv)
            self.assertEqual(sorted(c[0] for c in got.values()), USABLE[:2], got)
            self.assertIn("workers pinned one per CPU once booted (websockets.pool.cpu_affinity: auto)", srv.stderr())

    def test_pools_together_pin_no_more_workers_than_cpus(self):
        # The HTTP pool takes every CPU; one websockets worker more would share a CPU with an HTTP worker for
        # good: it is left to the scheduler, and the log says why.
        n = len(USABLE)
        cfg = config(num_workers=n)
        cfg["websockets"] = {"path": "/ws", "pool": {"num_workers": 1}}
        with Server(cfg, script="ws.php") as srv:
            self.assertTrue(wait_until(lambda: len(srv.workers()) == n + 1, 10.0), srv.workers())
            self.assertTrue(srv.wait_for_log(
                f"workers are not pinned (websockets.pool.cpu_affinity: auto): more workers (1, and {n} pinned "
                f"by this server's other pool) than usable CPUs ({n})"), srv.stderr())
            self.assertIn(f"workers pinned one per CPU once booted (http.pool.cpu_affinity: auto): {n} on CPUs",
                          srv.stderr())
            self.assertTrue(wait_until(lambda: sum(1 for p in srv.workers() if len(cpus_of(p) or []) == 1) == n,
                                       5.0), {p: cpus_of(p) for p in srv.workers()})
            got = {p: cpus_of(p) for p in srv.workers()}
            self.assertEqual(sorted(c[0] for c in got.values() if len(c) == 1), USABLE, got)
            self.assertEqual([c for c in got.values() if len(c) > 1], [USABLE], got)

    def test_auto_priority_boots_replacements_at_normal_priority(self):
        with Server(config(max_jobs=2), script=SCRIPT, env={"BOOT_MS": "300"}) as srv:
            self.assertTrue(srv.wait_for_log(
                "replacements boot at normal priority (http.pool.recycle_priority: auto, workers pinned)"))
            for _ in range(6):
                self.assertEqual(srv.request("GET", "/")[0], 200)
            self.assertNotIn("booting at idle priority", srv.stderr())
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 5.0))
            for pid in srv.workers():
                self.assertEqual(os.sched_getscheduler(pid), os.SCHED_OTHER)

    def test_off_leaves_them_unpinned(self):
        with Server(config(cpu_affinity="off"), script=SCRIPT) as srv:
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 5.0))
            for pid in srv.workers():
                self.assertEqual(cpus_of(pid), USABLE)
            self.assertNotIn("pinned", srv.stderr())

    def test_more_workers_than_cpus_are_not_pinned(self):
        n = len(USABLE) + 1
        with Server(config(num_workers=n), script=SCRIPT) as srv:
            self.assertTrue(wait_until(lambda: len(srv.workers()) == n, 10.0))
            self.assertTrue(srv.wait_for_log(
                f"workers are not pinned (http.pool.cpu_affinity: auto): more workers ({n}) than usable CPUs ({len(USABLE)})"))
            for pid in srv.workers():
                self.assertEqual(cpus_of(pid), USABLE)
            self.assertNotIn("pinned to CPU", srv.stderr())


class OneCpu(unittest.TestCase):
    @unittest.skipUnless(shutil.which("taskset"), "needs taskset")
    def test_one_usable_cpu_pins_nothing(self):
        cpu = USABLE[-1]
        with Server(config(num_workers=1), script=SCRIPT, prefix=["taskset", "-c", str(cpu)]) as srv:
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 1, 5.0))
            self.assertTrue(srv.wait_for_log("workers are not pinned (http.pool.cpu_affinity: auto): only one usable CPU"))
            self.assertEqual(srv.request("GET", "/")[0], 200)
            [pid] = srv.workers()
            self.assertEqual(cpus_of(pid), [cpu])


if __name__ == "__main__":
    unittest.main()
