"""http.pool.recycle_priority: a replacement for a worker that still serves (max_jobs, ttl, memory) boots
under SCHED_IDLE and serves under SCHED_OTHER; a retired worker exits under SCHED_IDLE; first boots, a
crash's replacement and `normal` boot at normal priority; a boot that finds no spare CPU for
idle_boot_limit (1 s) is raised to normal; without the right to restore a priority, `auto` falls back to
normal (logged) and `idle` refuses to start, naming the key."""

import os
import re
import shutil
import signal
import subprocess
import sys
import unittest

from harness import E2E_PHP_DIR, Server, wait_until

SCRIPT = os.path.join(E2E_PHP_DIR, "priority.php")
PROBE = ("import os; p = os.sched_param(0); os.sched_setscheduler(0, os.SCHED_IDLE, p); "
         "os.sched_setscheduler(0, os.SCHED_OTHER, p)")
# Runs ferry without CAP_SYS_NICE (RLIMIT_NICE stays what it is: 0 on a default system).
NO_SYS_NICE = ["setpriv", "--bounding-set=-sys_nice", "--"]


def may_restore(prefix=()):
    """Whether a process started like ferry (with `prefix`) may leave SCHED_IDLE again."""
    return subprocess.run(list(prefix) + [sys.executable, "-c", PROBE], stderr=subprocess.DEVNULL).returncode == 0


def policy(pid):
    try:
        return os.sched_getscheduler(pid)
    except (ProcessLookupError, PermissionError):
        return None


def config(max_jobs, priority=None):
    # Unpinned: with workers pinned (cpu_affinity: auto, the default), auto is normal (test_cpu_affinity.py).
    pool = {"num_workers": 1, "max_jobs": max_jobs, "cpu_affinity": "off"}
    if priority:
        pool["recycle_priority"] = priority
    return {"http": {"pool": pool}, "logs": {"level": "debug"}}


def serve_one(srv):
    status, _, body = srv.request("GET", "/")
    assert status == 200, (status, body)
    return int(body)


def replacement(srv, old, limit=40):
    """Sends requests (each must be answered) until a second worker process appears: its pid."""
    for _ in range(limit):
        served = serve_one(srv)
        if served != old:
            return served  # booted and serving already
        # From ferry's log, not from /proc/PID/environ (what workers() reads): the kernel fills a new
        # program's environ in after it wakes the launching parent, and a child at idle priority on a busy
        # machine may not get the CPU to do so for a second.
        others = [int(p) for p in re.findall(r"worker (\d+) spawned", srv.stderr()) if int(p) != old]
        if others:
            return others[0]
    raise AssertionError(f"no replacement for worker {old} after {limit} requests")


def boots_idle(pid):
    """True once `pid` runs under SCHED_IDLE (within 0.5 s): ferry sets the policy right after the child's
    exec, which it logs as spawned a moment later, on a loop that a busy machine may not run at once."""
    return wait_until(lambda: policy(pid) == os.SCHED_IDLE, 0.5, interval=0.005)


def served_by(srv, pid, timeout=10.0):
    """True once a request is answered by `pid` (every answer must be a 200)."""
    return wait_until(lambda: serve_one(srv) == pid, timeout, interval=0.02)


@unittest.skipUnless(may_restore(), "this user may not restore a priority (no CAP_SYS_NICE, RLIMIT_NICE < 20)")
class IdleRecycling(unittest.TestCase):
    def test_a_max_jobs_replacement_boots_idle_and_serves_at_normal_priority(self):
        with Server(config(4), script=SCRIPT, env={"BOOT_MS": "800"}) as srv:
            [first] = srv.workers()
            self.assertEqual(policy(first), os.SCHED_OTHER)  # a first boot is waited for: normal
            new = replacement(srv, first)
            self.assertTrue(boots_idle(new), (policy(new), srv.stderr()[-3000:]))  # still in its 800 ms boot
            self.assertTrue(served_by(srv, new))
            self.assertEqual(policy(new), os.SCHED_OTHER)
            self.assertTrue(wait_until(lambda: first not in srv.workers(), 5))
            log = srv.stderr()
            self.assertIn("at idle CPU priority (SCHED_IDLE)", log)
            self.assertIn(f"worker {new} spawned (booting at idle priority)", log)

    def test_a_replacement_still_booting_when_the_old_worker_is_half_past_max_jobs_is_raised(self):
        # The old worker serves on until the new one is ready, but only up to twice max_jobs: at one and a
        # half the boot gets normal priority, so that no request comes to wait for it.
        with Server(config(4), script=SCRIPT, env={"BOOT_MS": "2500"}) as srv:
            [first] = srv.workers()
            new = replacement(srv, first)
            self.assertTrue(boots_idle(new), (policy(new), srv.stderr()[-3000:]))
            # max_jobs 4..5 (jitter): 6..7 jobs is half past it, 8..10 twice (it stops). The replacement started
            # at the first job already (2 boots of 2.5 s outlast the jobs left at any rate): the old worker
            # serves every request until the raise.
            raised = (f"worker {new} still booting at idle priority: raised to normal (a worker it replaces is "
                      "50 % past max_jobs)")
            for _ in range(8):
                if raised in srv.stderr():
                    break
                self.assertEqual(serve_one(srv), first)
            self.assertTrue(srv.wait_for_log(raised, 0.5))
            self.assertEqual(policy(new), os.SCHED_OTHER)
            self.assertTrue(served_by(srv, new))

    def test_a_retired_worker_exits_at_idle_priority(self):
        # max_jobs 40: the replacement starts at the first rate check (10 jobs); the new worker's own first
        # check is 10 requests away, so it is not being replaced while the test looks at it.
        with Server(config(40), script=SCRIPT, env={"EXIT_MS": "1500"}) as srv:
            [first] = srv.workers()
            new = replacement(srv, first)
            self.assertTrue(served_by(srv, new))
            # first got its stop frame when new was ready, and sleeps 1.5 s before it exits
            self.assertTrue(wait_until(lambda: policy(first) == os.SCHED_IDLE, 3), policy(first))
            self.assertEqual(policy(new), os.SCHED_OTHER)
            self.assertTrue(wait_until(lambda: first not in srv.workers(), 5))
            self.assertEqual(policy(new), os.SCHED_OTHER)

    def test_a_boot_without_spare_cpu_is_raised_to_normal_after_a_second(self):
        # A 2.5 s boot stands for one that a saturated machine leaves no idle CPU: it must not wait for
        # boot_timeout at idle priority.
        with Server(config(4), script=SCRIPT, env={"BOOT_MS": "2500"}) as srv:
            [first] = srv.workers()
            new = replacement(srv, first)
            self.assertTrue(boots_idle(new), (policy(new), srv.stderr()[-3000:]))
            self.assertTrue(wait_until(lambda: policy(new) == os.SCHED_OTHER, 2.0), policy(new))
            self.assertNotIn(f"worker {new} ready", srv.stderr())  # raised while still booting
            self.assertTrue(srv.wait_for_log(f"worker {new} still booting at idle priority: raised to normal "
                                             "(1000 ms since its spawn)"))
            self.assertTrue(served_by(srv, new))

    def test_a_crashed_workers_replacement_boots_at_normal_priority(self):
        with Server(config(0), script=SCRIPT, env={"BOOT_MS": "800"}) as srv:
            [first] = srv.workers()
            os.kill(first, signal.SIGKILL)
            self.assertTrue(wait_until(lambda: [p for p in srv.workers() if p != first], 5))
            [new] = [p for p in srv.workers() if p != first]
            self.assertEqual(policy(new), os.SCHED_OTHER)  # requests wait for it
            self.assertTrue(served_by(srv, new))
            self.assertNotIn("booting at idle priority", srv.stderr())

    def test_normal_keeps_every_boot_and_exit_at_normal_priority(self):
        with Server(config(4, "normal"), script=SCRIPT, env={"BOOT_MS": "800", "EXIT_MS": "1500"}) as srv:
            [first] = srv.workers()
            new = replacement(srv, first)
            self.assertEqual(policy(new), os.SCHED_OTHER)  # booting
            self.assertTrue(served_by(srv, new))
            seen = []  # first's policy while it exits (1.5 s), until it is gone
            self.assertTrue(wait_until(lambda: seen.append(policy(first)) or first not in srv.workers(), 5))
            self.assertIn(os.SCHED_OTHER, seen)
            self.assertNotIn(os.SCHED_IDLE, seen)
            log = srv.stderr()
            self.assertNotIn("idle priority", log)
            self.assertNotIn("SCHED_IDLE", log)


@unittest.skipUnless(shutil.which("setpriv") and os.geteuid() == 0, "needs setpriv and root to drop CAP_SYS_NICE")
class WithoutTheRight(unittest.TestCase):
    def setUp(self):
        if subprocess.run(NO_SYS_NICE + ["true"], stderr=subprocess.DEVNULL).returncode != 0:
            self.skipTest("setpriv cannot drop CAP_SYS_NICE here (no CAP_SETPCAP)")
        if may_restore(NO_SYS_NICE):
            self.skipTest("RLIMIT_NICE lets this user restore a priority without CAP_SYS_NICE")

    def test_idle_refuses_to_start_and_names_the_key(self):
        srv = Server(config(4, "idle"), script=SCRIPT, prefix=NO_SYS_NICE)
        try:
            with self.assertRaises(AssertionError):
                srv.start(timeout=10)
            self.assertNotEqual(srv.proc.returncode, 0)
            log = srv.stderr()
            self.assertIn("http.pool.recycle_priority: idle: restoring a booted worker's priority needs CAP_SYS_NICE", log)
            self.assertIn("set it to auto or normal", log)
            self.assertEqual(srv.workers(), [])
        finally:
            srv.close()

    def test_auto_falls_back_to_normal_and_says_so(self):
        with Server(config(4), script=SCRIPT, env={"BOOT_MS": "800"}, prefix=NO_SYS_NICE) as srv:
            self.assertTrue(srv.wait_for_log("replacements boot at normal priority (http.pool.recycle_priority: auto)"))
            [first] = srv.workers()
            new = replacement(srv, first)
            self.assertEqual(policy(new), os.SCHED_OTHER)
            self.assertTrue(served_by(srv, new))
            self.assertNotIn("booting at idle priority", srv.stderr())


if __name__ == "__main__":
    unittest.main()
