"""http.pool.cpu_affinity: with `auto` (the default), at least two usable CPUs and no more workers than CPUs,
each worker is pinned to one CPU once its boot is done, spread over the CPUs ferry may run on (taskset
counts); a max_jobs replacement takes the CPU of the worker it replaces, with one loop or several; more
workers than CPUs, or `off`, leave them where the scheduler puts them; with workers pinned,
recycle_priority: auto boots replacements at normal priority; with several loops (no more than CPUs) each
loop's thread runs beside its own workers, and a process started from a pinned loop gets every CPU back."""

import os
import re
import shutil
import signal
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


def thread_cpus(pid):
    """{name: [cpus]} of the server's event-loop threads: "ferry" (loop 0: the main thread, whose id is the
    pid), "ferry-loop-N". Other threads are left out: a sanitizer's runtime starts its own, named as the
    thread that started it ("ferry" under TSan)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            if (name == "ferry" and int(tid) == pid) or name.startswith("ferry-loop-"):
                out[name] = sorted(os.sched_getaffinity(int(tid)))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def loops_config(loops, **pool):
    cfg = config(**pool)
    cfg["http"]["io_threads"] = loops
    return cfg


@unittest.skipUnless(len(USABLE) >= 2, "needs two usable CPUs")
class LoopsBesideTheirWorkers(unittest.TestCase):
    """With workers pinned and several loops (no more than CPUs), loop i runs on every loops-th CPU from
    position i, and its own workers are pinned among those CPUs."""

    def expected(self, loops):
        return {i: USABLE[i::loops] for i in range(loops)}

    def test_each_loop_runs_beside_its_own_workers(self):
        want = self.expected(2)
        with Server(loops_config(2, max_jobs=4), script=SCRIPT) as srv:
            said = "; ".join(f"loop {i} on CPU{'s' if len(c) > 1 else ''} {','.join(map(str, c))}"
                             for i, c in want.items())
            self.assertTrue(srv.wait_for_log(
                f"event loops pinned beside their workers (http.pool.cpu_affinity: auto): {said}"), srv.stderr())
            threads = thread_cpus(srv.proc.pid)
            self.assertEqual(threads.get("ferry"), want[0], threads)
            self.assertEqual(threads.get("ferry-loop-1"), want[1], threads)
            for _ in range(40):  # recycles a worker every 4-5 requests
                self.assertEqual(srv.request("GET", "/")[0], 200)
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 5.0), srv.workers())
            got = pins(srv)
            pinned = re.findall(r"worker (\d+) pinned to CPU (\d+) \(loop (\d+)\)", srv.stderr())
            self.assertGreaterEqual(len(pinned), 6, pinned)  # the first two and at least four replacements
            for pid, cpu, loop in pinned:
                self.assertIn(int(cpu), want[int(loop)], (pid, cpu, loop))
            for pid, cpus in got.items():  # the live ones are where their last log line says
                last = [int(c) for p, c, _ in pinned if int(p) == pid]
                self.assertTrue(last, (pid, pinned))
                self.assertEqual(cpus, [last[-1]], (pid, pinned))

    @unittest.skipUnless(len(USABLE) == 2, "the default differs from half the CPUs on two CPUs only")
    def test_two_cpus_default_to_a_loop_beside_each_worker(self):
        with Server(loops_config(0), script=SCRIPT) as srv:  # io_threads: 0 is the default
            self.assertTrue(srv.wait_for_log("with 2 worker(s) and 2 event loop(s)"), srv.stderr())
            self.assertTrue(srv.wait_for_log("event loops pinned beside their workers"), srv.stderr())
        with Server(loops_config(0, cpu_affinity="off"), script=SCRIPT) as srv:
            self.assertTrue(srv.wait_for_log("with 2 worker(s) and 1 event loop(s)"), srv.stderr())
        with Server(loops_config(0, num_workers=3), script=SCRIPT) as srv:  # not pinned
            self.assertTrue(srv.wait_for_log("with 3 worker(s) and 1 event loop(s)"), srv.stderr())

    def test_one_loop_is_left_to_the_scheduler(self):
        with Server(loops_config(1), script=SCRIPT) as srv:
            pins(srv)
            self.assertEqual(thread_cpus(srv.proc.pid).get("ferry"), USABLE)
            self.assertNotIn("event loops pinned", srv.stderr())

    def test_more_loops_than_cpus_are_left_to_the_scheduler(self):
        n = len(USABLE) + 1
        with Server(loops_config(n), script=SCRIPT) as srv:
            pins(srv)
            threads = thread_cpus(srv.proc.pid)
            self.assertEqual(len(threads), n, threads)
            self.assertTrue(all(c == USABLE for c in threads.values()), threads)
            self.assertNotIn("event loops pinned", srv.stderr())

    def test_fewer_workers_than_loops_leave_the_loops_free(self):
        # A loop with no worker of its own serves on the others': it is not tied to a CPU.
        with Server(loops_config(2, num_workers=1), script=SCRIPT) as srv:
            pins(srv)
            self.assertEqual(srv.request("GET", "/")[0], 200)
            threads = thread_cpus(srv.proc.pid)
            self.assertEqual(len(threads), 2, threads)
            self.assertTrue(all(c == USABLE for c in threads.values()), threads)
            self.assertNotIn("event loops pinned", srv.stderr())

    def test_off_leaves_the_loops_free(self):
        with Server(loops_config(2, cpu_affinity="off"), script=SCRIPT) as srv:
            self.assertTrue(wait_until(lambda: len(srv.workers()) == 2, 5.0))
            threads = thread_cpus(srv.proc.pid)
            self.assertEqual(len(threads), 2, threads)
            self.assertTrue(all(c == USABLE for c in threads.values()), threads)
            self.assertNotIn("pinned", srv.stderr())

    def test_a_process_started_from_a_pinned_loop_gets_every_cpu(self):
        # A template started anew after the loops were pinned (loop 0 starts it) must not inherit loop 0's
        # CPUs: it, and the workers it forks until they are pinned, may run anywhere.
        with Server(loops_config(2, fork=True, max_jobs=5), script="fork.php") as srv:
            self.assertTrue(srv.wait_for_log("event loops pinned beside their workers"), srv.stderr())
            first = re.search(r"template (\d+) ready", srv.stderr())
            self.assertIsNotNone(first, srv.stderr())
            os.kill(int(first.group(1)), signal.SIGKILL)
            for _ in range(60):  # recycling goes on (exec'd workers while no template is up), then a new template
                self.assertEqual(srv.request("GET", "/")[0], 200)

            def new_template():
                found = [int(p) for p in re.findall(r"template (\d+) ready", srv.stderr())]
                return found[-1] if found and found[-1] != int(first.group(1)) else None
            self.assertTrue(wait_until(new_template, 10.0), srv.stderr())
            self.assertEqual(cpus_of(new_template()), USABLE)
            self.assertEqual(thread_cpus(srv.proc.pid).get("ferry"), self.expected(2)[0])


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
