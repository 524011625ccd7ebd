// The pool: wires the roles together and owns the lifecycle. The roles, one file each:
//   worker      one process: pid, state, signals, jobs, how it is stopped
//   spawner     command, back-off after boot failures, launching, the PID handshake
//   reaper      SIGCHLD reaping and stderr forwarding
//   allocator   idle set and the FIFO of waiting requests
//   exchange    one request on one worker (docs/protocol.md §2-§4)
//   supervisor  max_jobs recycling, exec_ttl, exec_warn
// Here: one Shard per event loop, with the worker set and its transitions (available, retiring, stopping,
// broken, exited), keeping its share of num_workers serving, exec() (allocate, write, read, retry) and the
// lending of workers between loops; and Pool::Impl, which joins the shards (start/shutdown/kill_all/abandon,
// the reaper's pid table). docs/architecture.md, "Several loops", has the protocol between loops.
#include "ferry/pool/pool.hpp"

#include "affinity.hpp"

#include "allocator.hpp"
#include "event.hpp"
#include "exchange.hpp"
#include "ferry/relay/log.hpp"
#include "ferry/relay/loops.hpp"
#include "fork_template.hpp"
#include "priority.hpp"
#include "reaper.hpp"
#include "spawner.hpp"
#include "supervisor.hpp"
#include "worker.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <optional>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>

namespace ferry::pool {

namespace {
using clock = std::chrono::steady_clock;
// With several loops, a worker freed on one loop serves another loop's oldest waiting request instead of
// its own loop's when that one has waited this much longer (or nobody waits here): the hand-over costs two
// trips between threads, worth it only against a real imbalance.
constexpr std::int64_t lend_margin_ns = 1'000'000;
} // namespace

// One loop's part of the pool: its workers, their allocator, spawner and supervisor. Everything here runs on
// its loop's thread; other loops read only `published`, `serving_pub` and `failing_pub`, and reach a shard
// by posting to its loop.
struct Shard : std::enable_shared_from_this<Shard> {
    Shard(Pool::Impl &g, unsigned i, asio::io_context &io_, Options o, BootReport &boot_report)
        : group(g), index(i), io(io_), opt(std::move(o)), stopping(io_), changed(io_),
          allocator(io_, opt.allocate_timeout), spawner(io_, opt, stopping, boot_report),
          supervisor(opt, workers, stopping, boot_broken), exchange(opt)
    {
        supervisor.on_marked = [this] { maintain(); };
        allocator.discard = [this](const WorkerPtr &w) { kill_broken(w, Cause::error); };
        allocator.give_back = [this](const WorkerPtr &w) { give_back(w); };
    }

    Pool::Impl &group;
    const unsigned index; // the loop's
    // Options::cpu_affinity: the CPUs of this loop (CpuPins::loop_cpus), where its workers are pinned and,
    // for the HTTP pool, the loop's thread too; empty: any CPU of the table (one loop, or more loops than
    // CPUs). Set by resolve_cpu_affinity() before the first worker is pinned.
    std::vector<int> cpus;
    asio::io_context &io;
    Options opt;      // num_workers: this shard's share
    Registry workers; // every live process of this shard
    Flag stopping;    // shutdown() or kill_all() began
    Event changed;    // a worker became ready or exited, a boot failed, a spawn ended, a stop began
    Allocator allocator;
    Spawner spawner;
    Supervisor supervisor;
    Exchange exchange;
    unsigned spawning = 0; // spawn coroutines in progress, back-off included
    // Rolling reset: workers started before the last reset have a lower generation (stale). While new workers
    // fail to boot (boot_broken), none is retired, so the old ones keep serving; `reset_failure` tells the
    // reset in progress why it stopped.
    std::uint64_t generation = 0;
    bool boot_broken = false;
    bool started = false; // start() returned: boot failures are logged here, not by the caller of start()
    std::string reset_failure;
    unsigned reset_kills = 0;
    clock::time_point stop_deadline = clock::time_point::max();
    std::atomic<std::uint64_t> spawned_total{0}, recycled_total{0}, lent_total{0};
    // Written by this shard's thread only (a plain store), read by others.
    std::atomic<std::uint64_t> requests_total{0}, waited_total{0}, longest_wait_us{0};
    std::atomic<std::uint64_t> rejected_total{0}; // answered 503 at once: the queue was full (max_queue_size)
    std::atomic<std::uint64_t> jobs_total{0};     // requests workers finished
    std::atomic<std::uint64_t> exits_total[static_cast<unsigned>(Cause::count_)] = {};
    HistogramRecorder queue_wait, boot_time;
    // debug: once the first workers proved the app boots, workers are started for waiting requests only.
    bool on_demand = false;
    static void bump(std::atomic<std::uint64_t> &c)
    {
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    // For the other loops.
    Allocator::Published published;
    std::atomic<unsigned> serving_pub{0};
    std::atomic<bool> failing_pub{false};

    bool multi() const;
    std::size_t queued_everywhere() const; // requests waiting for a worker on every loop (others: published)
    Shard &shard(unsigned i) const;

    void publish_state()
    {
        serving_pub.store(serving(true), std::memory_order_relaxed);
        failing_pub.store(spawner.failures() > 0, std::memory_order_relaxed);
    }
    void changed_now()
    {
        publish_state();
        changed.notify();
    }

    // ---- the worker set --------------------------------------------------------------------------

    // Workers that can take requests; retiring ones (past max_jobs) only when `with_retiring`.
    unsigned serving(bool with_retiring) const
    {
        unsigned n = 0;
        for (const auto &[pid, w] : workers)
            if ((w->state == State::ready || w->state == State::working) && (with_retiring || !w->retire))
                ++n;
        return n;
    }

    // Keeps this shard's share of num_workers serving or booting (retiring ones do not count): a missing
    // worker is started at once; replacements for workers that still serve (max_jobs, a reset), max_recycling
    // at a time.
    void maintain()
    {
        publish_state();
        if (stopping.raised())
            return;
        if (on_demand) {
            // debug: a new worker for each waiting request, this loop's share of num_workers at most (at
            // least one: a loop whose share is 0 serves its own requests rather than wait on another loop).
            const unsigned busy = serving(true), share = std::max(1u, opt.num_workers);
            const unsigned room = share > busy ? share - busy : 0;
            const unsigned want = std::min<unsigned>(room, static_cast<unsigned>(allocator.waiting()));
            for (unsigned i = spawning; i < want; ++i) {
                ++spawning;
                asio::co_spawn(io, spawn_worker(shared_from_this(), false), log_exceptions{"spawn worker"});
            }
            return;
        }
        const unsigned fresh = serving(false), total = serving(true);
        const unsigned missing = opt.num_workers > total ? opt.num_workers - total : 0;
        const unsigned wanted = opt.num_workers > fresh ? opt.num_workers - fresh : 0;
        const unsigned target = std::min(wanted, missing + std::max(1u, opt.max_recycling));
        for (unsigned i = spawning; i < target; ++i) {
            ++spawning;
            // Past the missing ones, it replaces a worker that serves on: nobody waits for its boot (but a
            // reset, which someone waits for, boots its new code at once).
            const bool idle = i >= missing && idle_recycling() && older_than(generation) == 0;
            asio::co_spawn(io, spawn_worker(shared_from_this(), idle), log_exceptions{"spawn worker"});
        }
    }

    // A worker of this shard has nothing to do: stop it, hand it to a waiter (here or, with several loops,
    // on the loop that has waited longest), or park it (watched: output while idle is caught as it arrives).
    void make_available(const WorkerPtr &w)
    {
        if (w->state == State::dead || w->state == State::stopping || w->exited)
            return; // on its way out: it must not take a request after its stop frame
        if (w->stop_on_release || stopping.raised()) {
            start_stop(w);
            return;
        }
        // Its early replacement is ready: it serves on only while requests wait for a worker.
        if (w->replaced && allocator.waiting() == 0 && (!multi() || !waiting_elsewhere())) {
            start_stop(w);
            return;
        }
        if (!multi()) {
            if (!allocator.offer(w))
                park(w);
            return;
        }
        if (Shard *target = waiting_elsewhere()) {
            lend(w, *target);
            return;
        }
        if (allocator.offer(w) || !park(w))
            return;
        // Idle and published: a request that queued on another loop in the meantime may not have seen it.
        if (Shard *target = waiting_elsewhere())
            if (WorkerPtr idle = allocator.take_idle())
                lend(idle, *target);
    }

    // Nobody wants the worker now: it waits idle, watched (true), or in debug it stops (false: no worker
    // waits with the code as it was when it booted).
    bool park(const WorkerPtr &w)
    {
        if (on_demand) {
            w->cause = Cause::debug;
            start_stop(w);
            return false;
        }
        w->channel->watch();
        return true;
    }

    // ---- several loops ----------------------------------------------------------------------------

    // Another loop whose oldest waiting request should get a worker freed here: the one that has waited
    // longest, if it has waited longer than this loop's own oldest by lend_margin (none waiting here: any).
    Shard *waiting_elsewhere()
    {
        const std::int64_t mine = allocator.oldest();
        std::int64_t best = mine == Allocator::Published::no_waiter ? mine : mine - lend_margin_ns;
        Shard *target = nullptr;
        for (unsigned i = 0; i < shard_count(); ++i) {
            if (i == index)
                continue;
            std::int64_t t = shard(i).published.oldest.load();
            if (t < best) {
                best = t;
                target = &shard(i);
            }
        }
        return target;
    }

    // Hands a worker of this shard (state working) to a request waiting on `target`'s loop; the request runs
    // it here (run_on_home) and `target` sends it back if nobody waits there any more.
    void lend(const WorkerPtr &w, Shard &target)
    {
        w->state = State::working;
        lent_total.fetch_add(1, std::memory_order_relaxed);
        asio::post(target.io, [t = target.shared_from_this(), w] { t->accept_lent(w); });
    }

    // On the borrowing loop.
    void accept_lent(const WorkerPtr &w)
    {
        if (stopping.raised() || !allocator.offer_foreign(w))
            give_back(w);
    }

    // A worker handed to a request that no longer wants it: to its own shard's make_available().
    void give_back(const WorkerPtr &w)
    {
        if (w->home == index) {
            make_available(w);
            return;
        }
        Shard &home = shard(w->home);
        asio::post(home.io, [h = home.shared_from_this(), w] { h->make_available(w); });
    }

    // A request just queued here: every other loop with an idle worker is asked to lend one (those that
    // arrive when nobody waits any more go back).
    void queued()
    {
        if (on_demand)
            maintain();
        for (unsigned i = 0; i < shard_count(); ++i)
            if (i != index && shard(i).published.idle.load() > 0)
                asio::post(shard(i).io, [s = shard(i).shared_from_this(), me = shared_from_this()] {
                    s->lend_idle_to(*me);
                });
    }

    // On the lending loop.
    void lend_idle_to(Shard &target)
    {
        if (stopping.raised() || target.published.oldest.load() == Allocator::Published::no_waiter)
            return;
        if (WorkerPtr w = allocator.take_idle())
            lend(w, target);
    }

    unsigned shard_count() const;

    // ---- recycling and stopping -------------------------------------------------------------------

    // A request is done and the worker is clean: count the job, then recycle, stop or reuse it.
    void release(const WorkerPtr &w)
    {
        bump(jobs_total);
        switch (supervisor.job_done(*w)) {
        case Supervisor::AfterJob::keep:
            // Past max_jobs by half (it is stopped at twice): a replacement still booting at idle priority
            // gets normal priority, so that no request comes to wait for it.
            if (w->retire && w->max_jobs != 0 && w->jobs == w->max_jobs + w->max_jobs / 2)
                raise_idle_boots("a worker it replaces is 50 % past max_jobs");
            break;
        case Supervisor::AfterJob::retire:
            if (w->cause == Cause::max_jobs)
                recycled_total.fetch_add(1, std::memory_order_relaxed);
            maintain(); // its replacement boots while it keeps serving
            break;
        case Supervisor::AfterJob::stop:
            start_stop(w);
            return;
        }
        make_available(w);
    }

    // A new worker is ready: retire one worker that waits for its replacement, an idle one first, the oldest
    // generation first (under max_jobs churn a reset's old workers must not wait behind recycled new ones).
    void retire_one()
    {
        WorkerPtr idle, busy;
        for (auto &[pid, w] : workers) {
            if (!w->retire || w->stop_on_release || w->replaced || w->state == State::stopping ||
                w->state == State::dead)
                continue;
            WorkerPtr &pick = w->state == State::ready ? idle : busy;
            if (!pick || w->gen < pick->gen)
                pick = w;
        }
        if (idle)
            replaced(idle);
        else if (busy)
            replaced(busy);
    }

    // The replacement of `w` is ready. Idle, it stops now. Busy, it stops when its request is done (one a
    // reset made stale has reset_timeout for it); but one replaced ahead of its max_jobs (its replacement
    // started early) serves on while requests wait for a worker, up to max_jobs (Supervisor::job_done).
    void replaced(const WorkerPtr &w)
    {
        if (w->state == State::ready) {
            start_stop(w);
            return;
        }
        if (w->cause == Cause::max_jobs && w->max_jobs != 0 && w->jobs < w->max_jobs) {
            w->replaced = true;
            return;
        }
        w->stop_on_release = true;
        if (w->gen < generation)
            w->reset_deadline = clock::now() + opt.reset_timeout;
    }

    // Workers waiting for a replacement are kept only while the fresh ones are too few: with enough, they all
    // go (a worker that booted while a reset began arrives stale when its replacements are already there; it
    // would otherwise idle on and the reset would wait for it forever).
    void shed_surplus()
    {
        if (serving(false) < opt.num_workers)
            return;
        std::vector<WorkerPtr> surplus;
        for (auto &[pid, w] : workers)
            if (w->retire && !w->stop_on_release && !w->replaced &&
                (w->state == State::ready || w->state == State::working))
                surplus.push_back(w);
        for (auto &w : surplus)
            replaced(w);
    }

    // ---- rolling reset ----------------------------------------------------------------------------

    // Workers older than `gen` that still serve (spawning ones included) or, with `exiting`, are still alive
    // at all: a reset to `gen` is done when none is left.
    unsigned older_than(std::uint64_t gen, bool exiting = false) const
    {
        unsigned n = 0;
        for (const auto &[pid, w] : workers)
            if (w->gen < gen && (exiting || (w->state != State::stopping && w->state != State::dead)))
                ++n;
        return n;
    }

    // How this shard's part of a reset ended.
    struct ResetEnd {
        enum class Kind { done, boot_failed, stopping } kind = Kind::done;
        ResetReport report;
        std::string error; // boot_failed: the boot failure's message
    };

    awaitable<ResetEnd> reset(std::uint64_t gen)
    {
        generation = std::max(generation, gen);
        spawner.booted(); // a reset clears the boot back-off: the new code gets its try now
        boot_broken = false;
        reset_failure.clear();
        const unsigned kills_before = reset_kills;
        ResetReport report;
        for (auto &[pid, w] : workers)
            if (w->gen < gen && (w->state == State::ready || w->state == State::working)) {
                if (w->replaced) // its max_jobs replacement is there already, with code as old as its own
                    w->stop_on_release = true;
                w->retire = true;
                w->cause = Cause::reset;
                ++report.replaced;
            }
        maintain();
        for (;;) {
            if (stopping.raised())
                co_return ResetEnd{ResetEnd::Kind::stopping, report, {}};
            if (!reset_failure.empty())
                co_return ResetEnd{ResetEnd::Kind::boot_failed, report, reset_failure};
            if (older_than(gen, true) == 0) // every old process is gone
                break;
            co_await changed.wait_until(clock::time_point::max());
        }
        report.killed = reset_kills - kills_before;
        co_return ResetEnd{ResetEnd::Kind::done, report, {}};
    }

    // Causes of a worker marked for replacement that still serves: what ends it first is counted instead.
    static bool replacing(Cause c)
    {
        return c == Cause::max_jobs || c == Cause::ttl || c == Cause::idle_ttl || c == Cause::memory ||
               c == Cause::reset;
    }

    void start_stop(const WorkerPtr &w)
    {
        w->exec_ctx = nullptr;
        w->exec_sink = nullptr;
        if (w->state == State::stopping || w->state == State::dead)
            return;
        allocator.remove(w);
        w->state = State::stopping;
        if (w->retire && w->cause != Cause::reset && !stopping.raised() && idle_recycling())
            detail::set_idle(w->pid); // a replaced worker's exit (shutdown functions, freeing its memory)
        auto deadline = std::min(clock::now() + opt.destroy_timeout, stop_deadline);
        asio::co_spawn(io,
                       stop_worker(w, deadline, std::shared_ptr<const Flag>(shared_from_this(), &stopping)),
                       log_exceptions{"stop worker"});
        maintain();
        changed.notify(); // a reset waits for old workers to be on their way out
    }

    // The worker broke mid-request or at boot: kill it now; the reaper replaces it. `why` is counted at its
    // exit unless a cause was already decided (exec_ttl).
    void kill_broken(const WorkerPtr &w, Cause why)
    {
        if (w->cause == Cause::none || replacing(w->cause))
            w->cause = why;
        w->exec_ctx = nullptr;
        w->exec_sink = nullptr;
        allocator.remove(w);
        if (w->state != State::dead)
            w->state = State::stopping;
        w->signal(SIGKILL);
        maintain();
    }

    // Output that no request asked for (relay::Channel::on_unexpected).
    void unexpected_output(const WorkerPtr &w, const std::string &what)
    {
        if (w->state == State::stopping || w->state == State::dead || stopping.raised())
            return;
        log::error("pool", w->tag() + " wrote " + what + "; retiring it");
        kill_broken(w, Cause::error);
    }

    // The reaper saw a child of this shard end.
    void on_exit(int pid, int status)
    {
        auto it = workers.find(pid);
        if (it == workers.end())
            return;
        WorkerPtr w = it->second;
        workers.erase(it);
        if (w->cpu >= 0)
            detail::CpuPins::process().release(pid);
        bool expected = w->state == State::stopping || w->state == State::dead;
        // Exited before its handshake: a boot failure, which the handshake's failure reports with its output,
        // or the stop's SIGTERM to a booting worker; never unexpected.
        const bool booting = w->state == State::spawning;
        if (booting && w->cause == Cause::none)
            w->cause = stopping.raised() ? Cause::shutdown : Cause::boot_failure;
        if (w->cause == Cause::none)
            w->cause = expected ? (stopping.raised() ? Cause::shutdown : Cause::worker_stop) : Cause::crash;
        // Marked for replacement (a limit reached, its replacement started early) but still serving when it
        // died by itself: a crash all the same.
        if (!expected && replacing(w->cause))
            w->cause = Cause::crash;
        // Killed for breaking off mid-request, it had in fact died by itself (its stdout closed): a crash.
        if (w->cause == Cause::error && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            w->cause = Cause::crash;
        if (!w->is_template)
            bump(exits_total[static_cast<unsigned>(w->cause)]);
        std::string what = w->tag() + " " + describe_status(status);
        if ((expected && WIFEXITED(status) && WEXITSTATUS(status) == 0) || booting ||
            w->cause == Cause::boot_failure)
            log::debug("pool", what);
        else if (expected)
            log::info("pool", what);
        else
            log::warn("pool", what + " unexpectedly while " + state_name(w->state));
        w->on_exit(status); // what it started (exec('sleep 600 &')) ends with it
        if (w->reset_killed)
            ++reset_kills;
        allocator.remove(w);
        // A working worker's request notices EOF on its stdout and answers 502 itself.
        if (w->state != State::working)
            w->state = State::dead;
        changed_now();
        maintain();
    }

    // ---- spawning ---------------------------------------------------------------------------------

    // A new worker started from its command (on loops[0], see Impl::launch_on_first), its pipes on this loop.
    // `idle`: it boots under SCHED_IDLE (Options::recycle_priority).
    awaitable<Result<WorkerPtr>> launch(bool idle);
    // A new worker: forked from the pool's template (Options::fork) when there is a usable one (a fork is
    // cheap: never idle), else launch(idle).
    awaitable<Result<WorkerPtr>> launch_worker(bool idle);

    bool idle_recycling() const;
    void idle_recycling_failed(const WorkerPtr &w);

    // An idle-booting worker back to normal priority; `why`, when given, is logged.
    void restore_priority(const WorkerPtr &w, const std::string &why = {})
    {
        w->idle_boot = false;
        if (!detail::set_normal(w->pid))
            idle_recycling_failed(w);
        else if (!why.empty())
            log::debug("pool", w->tag() + " still booting at idle priority: raised to normal (" + why + ")");
    }

    // A worker whose boot is done goes to the CPU with the fewest workers that still count
    // (Options::cpu_affinity). This shard's workers marked for replacement or stopping since the last pin
    // give theirs up first: a replacement gets the CPU of the worker it replaces.
    void pin(const WorkerPtr &w);

    // Every worker of this shard still booting at idle priority is raised to normal.
    void raise_idle_boots(const std::string &why)
    {
        for (auto &[pid, b] : workers)
            if (b->idle_boot && b->state == State::spawning)
                restore_priority(b, why);
    }

    // An idle boot that has not finished within idle_boot_limit is raised to normal priority: a machine
    // busy enough to leave it no spare CPU must not turn it into a boot failure (boot_timeout).
    static awaitable<void> limit_idle_boot(std::shared_ptr<Shard> self, std::weak_ptr<Worker> weak)
    {
        co_await self->stopping.wait_until(clock::now() + self->opt.idle_boot_limit);
        WorkerPtr w = weak.lock();
        if (w && w->idle_boot && w->state == State::spawning && !self->stopping.raised())
            self->restore_priority(w,
                                   std::to_string(self->opt.idle_boot_limit.count()) + " ms since its spawn");
    }

    static awaitable<void> spawn_worker(std::shared_ptr<Shard> self, bool idle)
    {
        co_await self->spawner.back_off();
        const std::uint64_t spawn_gen = self->generation; // the code it loads is at least this recent
        if (self->stopping.raised()) {
            --self->spawning;
            self->changed_now();
            co_return;
        }
        auto launched = co_await self->launch_worker(idle);
        if (!launched && self->stopping.raised()) {
            --self->spawning;
            self->changed_now();
            co_return;
        }
        if (!launched) {
            --self->spawning;
            self->boot_failed(launched.error().message);
            co_return;
        }
        WorkerPtr w = *launched;
        if (!w->is_template && w->gen == 0)
            w->gen = spawn_gen;
        self->spawned_total.fetch_add(1, std::memory_order_relaxed);
        self->workers.emplace(w->pid, w);
        w->channel->on_unexpected = [weak_self = std::weak_ptr<Shard>(self),
                                     weak_w = std::weak_ptr<Worker>(w)](const std::string &what) {
            auto s = weak_self.lock();
            auto wp = weak_w.lock();
            if (s && wp)
                s->unexpected_output(wp, what);
        };
        w->channel->watch();
        asio::co_spawn(self->io,
                       forward_stderr(w,
                                      [weak = std::weak_ptr<Shard>(self)](std::string_view line) {
                                          auto s = weak.lock();
                                          return s && s->spawner.boot_line_repeated(line);
                                      }),
                       log_exceptions{"worker stderr"});
        log::debug("pool", w->tag() + (w->idle_boot ? " spawned (booting at idle priority)" : " spawned"));
        if (w->idle_boot)
            asio::co_spawn(self->io, limit_idle_boot(self, w), asio::detached);

        auto booted = co_await self->spawner.handshake(w);
        --self->spawning;
        if (!booted && self->stopping.raised()) {
            self->kill_broken(w, Cause::shutdown); // stopped while booting: not a boot failure
            self->changed_now();
            co_return;
        }
        if (!booted) {
            self->hold_replacements(); // before kill_broken(), whose maintain() would start another one
            // Give the process a moment to exit by itself so the message can say how it ended (its own exit
            // code, not our SIGKILL) and what it printed; then make sure it is gone.
            if (w->state != State::dead)
                w->state = State::stopping;
            w->cause = Cause::boot_failure;
            co_await wait_exit(w, std::chrono::milliseconds(200));
            self->kill_broken(w, Cause::boot_failure);
            co_await wait_exit(w, std::chrono::milliseconds(500));
            self->boot_failed(
                Spawner::boot_failure(*w, booted.error().message, self->spawner.command_line()));
            co_return;
        }
        // Only a worker with the current code shows that new workers boot: one started before a reset (a
        // max_jobs replacement that loaded the old code) arriving after the reset's boots failed must not
        // resume recycling (the old workers would stop while their replacements cannot boot) nor clear the
        // back-off.
        const bool current = w->gen >= self->generation;
        if (current) {
            self->spawner.booted();
            self->boot_broken = false;
        }
        if (w->idle_boot)
            self->restore_priority(w);
        self->pin(w);
        self->supervisor.ready(*w);
        const auto took = clock::now() - w->started;
        self->supervisor.booted(took);
        self->boot_time.observe(
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
        if (!current) { // a reset began while it booted: it may have loaded the old code
            w->retire = true;
            if (w->cause == Cause::none)
                w->cause = Cause::reset; // its exit is the reset's (it was counted as worker_stop)
        }
        log::info("pool", w->tag() + " ready (" + (w->codec == relay::Codec::msgpack ? "msgpack" : "json") +
                              " context)");
        w->state = State::ready; // counted as serving before retire_one() asks maintain() for more
        if (!w->retire)
            self->retire_one(); // a fresh worker replaces one that waits for it (never itself)
        self->make_available(w);
        self->shed_surplus();
        // Its boot slot is free: a reset that began while it booted starts its next new worker now (it would
        // otherwise wait for the next request to call maintain()).
        self->maintain();
        self->changed_now();
    }

    bool first_boot_failure(); // of this reset, on any loop

    // A new worker failed to boot: the workers still serving keep serving (retiring them for a reset or
    // max_jobs would end the last good ones) until a reset tries again. True when there were such workers.
    bool hold_replacements()
    {
        unsigned kept = 0;
        for (auto &[pid, w] : workers)
            if (w->retire && !w->stop_on_release && !w->replaced &&
                (w->state == State::ready || w->state == State::working)) {
                w->retire = false;
                ++kept;
            }
        if (kept == 0 && older_than(generation) == 0)
            return false;
        if (!boot_broken)
            log::warn("pool",
                      "new workers cannot boot: " + std::to_string(serving(true)) +
                          " worker(s) with the code they loaded keep serving; recycling waits for a reset "
                          "that boots");
        boot_broken = true;
        return true;
    }

    void boot_failed(const std::string &msg)
    {
        spawner.boot_failed(msg);
        const bool in_reset = older_than(generation) > 0;
        // Once per back-off step (the workers that boot together fail together); during a reset every loop
        // tries its own new workers: logged by the first loop only; while starting, start()'s error is the
        // report (the server logs it once).
        std::string line = spawner.report_failure();
        if (started && !line.empty() && (!in_reset || first_boot_failure()))
            log::error("pool", line);
        else
            log::debug("pool", msg);
        if (hold_replacements())
            reset_failure = msg;
        publish_state();
        if (serving(true) == 0 && allocator.waiting() > 0)
            allocator.fail_waiters("no worker available: " + msg);
        changed_now();
        maintain();
    }

    // ---- requests ---------------------------------------------------------------------------------

    enum class Step {
        done,    // `res` is the answer
        retry,   // the worker refused or could not take the request: another worker gets it
        skipped, // the worker was found broken before the request was written: another one gets it
        none,    // (another loop) no idle worker there
    };

    // No idle worker on any loop and the last boots failed: answer at once instead of waiting.
    bool hopeless() const;

    awaitable<Reply> exec(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                          StreamSink *sink)
    {
        Reply res;
        RequestFrame frame; // the request as written to a worker of this loop
        unsigned skipped_broken = 0;
        const unsigned total_workers = group_workers();
        bump(requests_total);
        // A worker may ask to stop instead of answering: the same request goes to another worker.
        for (unsigned attempt = 0; attempt <= total_workers + 1; ++attempt) {
            WorkerPtr w = stopping.raised() ? nullptr : allocator.take_idle(); // no coroutine frame
            Step step = Step::none;
            if (!w) {
                if (stopping.raised()) {
                    res.outcome = Outcome::no_worker;
                    res.message = "server is shutting down";
                    co_return res;
                }
                if (hopeless()) {
                    res.outcome = Outcome::no_worker;
                    res.message =
                        "no worker available: " + (spawner.last_error().empty()
                                                       ? std::string("workers fail to boot (see above)")
                                                       : spawner.last_error());
                    co_return res;
                }
                if (multi())
                    step = co_await run_elsewhere(ctx, body, body_out, sink, res);
                if (step == Step::none && opt.max_queue_size > 0 &&
                    queued_everywhere() >= opt.max_queue_size) {
                    // max_queue_size: a full queue answers at once (503 with Retry-After) instead of waiting.
                    bump(rejected_total);
                    res.outcome = Outcome::no_worker;
                    res.message = "the queue is full (max_queue_size " + std::to_string(opt.max_queue_size) +
                                  " requests wait for a worker)";
                    co_return res;
                }
                if (step == Step::none) {
                    const auto queued_at = clock::now();
                    Allocation a = co_await allocator.wait(sink);
                    bump(waited_total);
                    const auto us = static_cast<std::uint64_t>(
                        std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - queued_at)
                            .count());
                    queue_wait.observe(us);
                    if (us > longest_wait_us.load(std::memory_order_relaxed))
                        longest_wait_us.store(us, std::memory_order_relaxed);
                    if (!a.worker) {
                        res.outcome = a.outcome;
                        res.message = std::move(a.why);
                        co_return res;
                    }
                    w = std::move(a.worker);
                }
            }
            if (w && w->home != index) {
                step = co_await run_on_home(w, ctx, body, body_out, sink, res);
            } else if (w && !begin(w, ctx, body, sink, res, frame)) {
                step = Step::skipped;
            } else if (w) { // run(), inline: no coroutine frame of its own
                error_code wec = co_await w->channel->write(frame.parts());
                if (!wec && body.fd >= 0)
                    wec = co_await Exchange::write_file(w->channel->stdin_pipe(), body.fd, body.size);
                if (wec) {
                    step = write_failed(w, wec);
                } else {
                    After after = co_await exchange.read_reply(w, res, body_out, sink);
                    step = finished(w, after);
                }
            }
            switch (step) {
            case Step::done:
                co_return res;
            case Step::skipped:
                if (++skipped_broken <= 2 * total_workers)
                    --attempt; // not the worker's refusal: does not count against the retry bound
                continue;
            case Step::retry:
            case Step::none:
                continue;
            }
        }
        res.outcome = Outcome::no_worker;
        res.message = "every worker asked to stop instead of answering";
        co_return res;
    }

    unsigned group_workers() const;

    // One request on a worker of this shard (its state working), on this shard's loop: three plain steps
    // around its two waits (writing the request, reading the reply), so that exec() runs a request on its
    // own loop's worker without a coroutine frame for it (that frame cost ~700 instructions per request,
    // callgrind); run() is the same for a request from another loop.
    // begin(): false when the worker is broken (the request is then Step::skipped).
    bool begin(const WorkerPtr &w, const relay::RequestContext &ctx, BodyRef body, StreamSink *sink,
               Reply &res, RequestFrame &frame)
    {
        if (!w->channel->claim()) {
            // It wrote more after its last reply, or while idle (seen by the idle watch, or by claim()'s read
            // of its pipe just now, before this request was written): retired, and this request goes to
            // another worker.
            kill_broken(w, Cause::error);
            return false;
        }
        res.worker_pid = w->pid;
        exchange.prepare(*w, ctx, body, frame);
        w->exec_ctx = &ctx;
        w->exec_sink = sink;
        w->exec_started = supervisor.now(); // the supervisor's own tick: no clock read per request
        w->exec_warned = false;
        w->exec_streaming = false;
        w->client_left_at = {};
        return true;
    }

    Step write_failed(const WorkerPtr &w, error_code wec)
    {
        // The worker died before it could read the request (e.g. while idle, its exit not reaped yet):
        // nothing ran, so another worker gets it.
        log::warn("pool", w->tag() + ": writing the request failed (" + wec.message() +
                              "); retrying on another worker");
        kill_broken(w, Cause::crash);
        return Step::retry;
    }

    Step finished(const WorkerPtr &w, After after)
    {
        switch (after) {
        case After::release:
            release(w);
            return Step::done;
        case After::kill:
            kill_broken(w, w->exited ? Cause::crash : Cause::error);
            return Step::done;
        case After::kill_later: // the client gets its 504 before the worker is killed
            asio::post(io, [self = shared_from_this(), w] { self->kill_broken(w, Cause::exec_ttl); });
            return Step::done;
        case After::stop_retry:
            recycled_total.fetch_add(1, std::memory_order_relaxed);
            if (w->cause == Cause::none)
                w->cause = Cause::worker_stop;
            start_stop(w);
            return Step::retry;
        case After::kill_retry:
            recycled_total.fetch_add(1, std::memory_order_relaxed);
            kill_broken(w, Cause::worker_stop);
            return Step::retry;
        case After::kill_resend:
            kill_broken(w, Cause::error);
            return Step::retry;
        }
        return Step::done;
    }

    awaitable<Step> run(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                        StreamSink *sink, Reply &res)
    {
        RequestFrame frame;
        if (!begin(w, ctx, body, sink, res, frame))
            co_return Step::skipped;
        error_code wec = co_await w->channel->write(frame.parts());
        if (!wec && body.fd >= 0)
            wec = co_await Exchange::write_file(w->channel->stdin_pipe(), body.fd, body.size);
        if (wec)
            co_return write_failed(w, wec);
        After after = co_await exchange.read_reply(w, res, body_out, sink);
        co_return finished(w, after);
    }

    // On another loop: an idle worker there, if there is one, runs the request.
    awaitable<Step> run_idle(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                             StreamSink *sink, Reply &res)
    {
        if (stopping.raised())
            co_return Step::none;
        WorkerPtr w = allocator.take_idle();
        if (!w)
            co_return Step::none;
        co_return co_await run(w, ctx, body, body_out, sink, res);
    }

    // This loop has no idle worker: run the request on another loop that has one (the first that still has
    // one when the request gets there). The client's sink stays on this loop (ProxySink).
    awaitable<Step> run_elsewhere(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                                  StreamSink *sink, Reply &res);
    // A worker another loop lent: the request runs on the worker's loop.
    awaitable<Step> run_on_home(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body,
                                std::string &body_out, StreamSink *sink, Reply &res);

    // ---- lifecycle --------------------------------------------------------------------------------

    // Starts this shard's share of the workers and waits until they are ready, one failed to boot, or a
    // stop began.
    awaitable<Result<void>> start()
    {
        asio::co_spawn(io, Supervisor::run({shared_from_this(), &supervisor}), log_exceptions{"supervisor"});
        maintain();
        for (;;) {
            if (stopping.raised())
                co_return fail("stopped while starting");
            if (serving(true) >= opt.num_workers) {
                started = true;
                if (opt.debug)
                    start_on_demand();
                co_return Result<void>{};
            }
            if (spawner.failures() > 0)
                co_return fail(spawner.last_error());
            co_await changed.wait_until(clock::time_point::max());
        }
    }

    // debug: the workers that proved the app boots are stopped (they loaded the code as it was at start);
    // from now on each request gets a worker started for it.
    void start_on_demand()
    {
        on_demand = true;
        std::vector<WorkerPtr> idle;
        for (auto &[pid, w] : workers)
            if (w->state == State::ready)
                idle.push_back(w);
        for (auto &w : idle) {
            w->cause = Cause::debug;
            start_stop(w);
        }
    }

    // Stops this shard's workers by `deadline`: idle ones get the stop frame now, busy ones when their
    // request is done; whatever still runs at the deadline is killed, with a log line each.
    awaitable<Result<void>> shutdown(clock::time_point deadline)
    {
        stop_deadline = deadline;
        stopping.raise();
        changed_now();
        allocator.fail_waiters("server is shutting down");
        std::vector<WorkerPtr> all;
        for (auto &[pid, w] : workers)
            all.push_back(w);
        for (auto &w : all) {
            if (w->state == State::ready)
                start_stop(w);
            else if (w->state == State::working)
                w->stop_on_release = true;
            else if (w->state == State::spawning)
                w->signal(SIGTERM);
        }
        while ((!workers.empty() || spawning > 0) && clock::now() < deadline)
            co_await changed.wait_until(deadline);
        auto budget = std::to_string(opt.destroy_timeout.count());
        for (auto &[pid, w] : workers) {
            log::warn("pool", w->tag() + " still " + state_name(w->state) +
                                  " at the stop deadline (destroy_timeout " + budget + " ms): killing it");
            w->signal(SIGKILL);
        }
        auto reap_by = clock::now() + std::chrono::seconds(1);
        while (!workers.empty() && clock::now() < reap_by)
            co_await changed.wait_until(reap_by);
        co_return Result<void>{};
    }

    void raise_stop()
    {
        stopping.raise();
        changed_now();
    }
};

// Runs a sink's calls on the client's loop for a request that runs on another loop's worker.
class ProxySink final : public StreamSink {
public:
    ProxySink(StreamSink &real, asio::any_io_executor client) : real_(real), client_(std::move(client)) {}

    awaitable<bool> on_informational(const relay::ResponseContext &head) override
    {
        co_return co_await asio::co_spawn(client_, real_.on_informational(head), use_awaitable);
    }
    awaitable<bool> on_chunk(const relay::ResponseContext &head, std::string_view body, bool last) override
    {
        co_return co_await asio::co_spawn(client_, real_.on_chunk(head, body, last), use_awaitable);
    }
    awaitable<bool> write_whole(const relay::ResponseContext &head, std::string_view body) override
    {
        co_return co_await asio::co_spawn(client_, real_.write_whole(head, body), use_awaitable);
    }
    // Asked only by the allocator of the client's own loop (never on a lent worker's loop).
    bool client_gone() override { return false; }
    // Asked by the worker's loop (its supervisor): the answer comes from the client's loop a tick later. The
    // question is posted before the exchange's completion, from the same loop, so it runs while this sink
    // still exists (a loop runs what is posted to it in order).
    bool client_left() override
    {
        if (!asking_.exchange(true))
            asio::post(client_, [this] {
                left_.store(real_.client_left());
                asking_.store(false);
            });
        return left_.load();
    }

private:
    StreamSink &real_;
    asio::any_io_executor client_;
    std::atomic<bool> asking_{false}, left_{false};
};

// What the shards share: the worker total, the pid → shard table for the reaper (written at spawn and exit
// only, under a mutex), and the reaper itself on loops[0].
struct Pool::Impl {
    Impl(const std::vector<asio::io_context *> &loops, Options o)
        : opt(std::move(o)),
          reaper(std::make_shared<Reaper>(*loops.at(0), [this](int pid, int status) { reaped(pid, status); }))
    {
        const auto n = static_cast<unsigned>(loops.size());
        for (unsigned i = 0; i < n; ++i) {
            Options share = opt;
            share.num_workers = opt.num_workers / n + (i < opt.num_workers % n ? 1 : 0);
            shards.push_back(std::make_shared<Shard>(*this, i, *loops[i], std::move(share), boot_report));
            shards.back()->allocator.on_queued = [s = shards.back().get()] { s->queued(); };
            if (n > 1)
                shards.back()->allocator.publish_to(&shards.back()->published);
        }
        if (opt.fork != Fork::off) {
            Shard &first = *shards[0];
            tmpl = std::make_shared<ForkTemplate>(first.io, first.opt, first.spawner, first.stopping,
                                                  [this](int pid, bool alive) -> std::optional<int> {
                                                      if (alive)
                                                          return claim(pid, template_owner);
                                                      std::lock_guard lock(mu);
                                                      exits().owners.erase(pid);
                                                      return std::nullopt;
                                                  });
        }
    }

    Options opt;
    // Options::recycle_priority as resolved by start(): replacements boot and retired workers exit under
    // SCHED_IDLE. Cleared for good if restoring a worker's priority ever fails.
    std::atomic<bool> idle_recycling{false};
    // Options::cpu_affinity as resolved by start(): workers are pinned (Shard::pin). Cleared for good if
    // pinning a worker ever fails.
    std::atomic<bool> pinning{false};
    unsigned reserved_cpus = 0; // CpuPins::reserve()d by resolve_cpu_affinity(), given back by ~Pool
    BootReport boot_report;     // every loop's spawner reports boot failures through it (before `shards`)
    std::vector<std::shared_ptr<Shard>> shards;
    std::shared_ptr<Reaper> reaper;
    std::shared_ptr<ForkTemplate> tmpl;              // Options::fork: on loops[0]
    std::uint64_t generation = 0;                    // of the last rolling reset (loops[0])
    std::atomic<std::uint64_t> failed_generation{0}; // the last reset whose new workers failed to boot

    // True for the first boot failure of the reset to `gen` (any loop).
    bool first_failure_of(std::uint64_t gen) { return failed_generation.exchange(gen) != gen; }
    static constexpr unsigned template_owner = ~0u;

    // Every pool of the process (the HTTP workers, the websockets workers) shares one table of its children:
    // each pool's reaper calls waitpid(-1), so it may reap another pool's worker and must route it there.
    // Guarded by its mutex; written at spawn and exit only.
    struct Exits {
        std::mutex mu;
        std::unordered_map<int, std::pair<Impl *, unsigned>> owners; // pid → pool, shard or template_owner
        // Exits of pids nobody had claimed yet: a forked worker's pid is known only when the template
        // answers, and it may exit (and be reaped) before its shard records it. Bounded; the oldest go.
        struct Unclaimed {
            int pid, status;
            clock::time_point at;
        };
        std::deque<Unclaimed> unclaimed;
    };
    static Exits &exits()
    {
        static Exits table;
        return table;
    }
    std::mutex &mu = exits().mu;

    ~Impl()
    {
        std::lock_guard lock(mu);
        std::erase_if(exits().owners, [this](const auto &kv) { return kv.second.first == this; });
    }

    Result<int> launch_on_first(const Spawner &spawner, ForkTemplate::ChildEnds ends, unsigned owner);

    // Records that `pid` belongs to `owner`; the wait status instead when it has already been reaped.
    std::optional<int> claim(int pid, unsigned owner)
    {
        std::lock_guard lock(mu);
        auto &unclaimed = exits().unclaimed;
        for (auto it = unclaimed.begin(); it != unclaimed.end(); ++it)
            if (it->pid == pid) {
                int status = it->status;
                unclaimed.erase(it);
                return status;
            }
        exits().owners.emplace(pid, std::make_pair(this, owner));
        return std::nullopt;
    }

    void reaped(int pid, int status)
    {
        Impl *pool;
        unsigned owner;
        {
            std::lock_guard lock(mu);
            auto &owners = exits().owners;
            auto it = owners.find(pid);
            if (it == owners.end()) {
                // Not (yet) anyone's: a forked worker not claimed yet, or what a dead worker left behind and
                // the kernel re-parented to us (we are a child subreaper in fork mode).
                auto &unclaimed = exits().unclaimed;
                auto now = clock::now();
                while (!unclaimed.empty() &&
                       (unclaimed.size() >= 64 || now - unclaimed.front().at > std::chrono::seconds(10)))
                    unclaimed.pop_front();
                unclaimed.push_back({pid, status, now});
                return;
            }
            std::tie(pool, owner) = it->second;
            owners.erase(it);
        }
        pool->exited(pid, status, owner); // every pool's reaper runs on loops[0]
    }

    void exited(int pid, int status, unsigned owner)
    {
        if (owner == template_owner) { // on loops[0], the template's loop
            tmpl->on_exit(pid, status);
            return;
        }
        if (owner == 0) { // the reaper's own loop
            shards[0]->on_exit(pid, status);
            return;
        }
        Shard &s = *shards[owner];
        asio::post(s.io, [sp = s.shared_from_this(), pid, status] { sp->on_exit(pid, status); });
    }

    std::vector<asio::any_io_executor> loops() const
    {
        std::vector<asio::any_io_executor> out;
        for (auto &s : shards)
            out.push_back(s->io.get_executor());
        return out;
    }

    void resolve_cpu_affinity()
    {
        if (opt.cpu_affinity == CpuAffinity::off || opt.debug)
            return;
        const auto &cpus = detail::CpuPins::process().cpus();
        const std::string key = opt.mode + ".pool.cpu_affinity: auto";
        if (cpus.size() < 2) {
            log::debug("pool", "workers are not pinned (" + key + "): only one usable CPU");
            return;
        }
        unsigned others = 0;
        if (!detail::CpuPins::process().reserve(opt.num_workers, others)) {
            log::debug(
                "pool",
                "workers are not pinned (" + key + "): more workers (" + std::to_string(opt.num_workers) +
                    (others > 0 ? ", and " + std::to_string(others) + " pinned by this server's other pool"
                                : std::string()) +
                    ") than usable CPUs (" + std::to_string(cpus.size()) + ")");
            return;
        }
        reserved_cpus = opt.num_workers;
        pinning.store(true, std::memory_order_relaxed);
        log::info("pool", "workers pinned one per CPU once booted (" + key +
                              "): " + std::to_string(opt.num_workers) + " on CPUs " + detail::cpu_list(cpus));
        for (auto &s : shards)
            s->cpus = detail::CpuPins::loop_cpus(cpus, s->index, static_cast<unsigned>(shards.size()));
    }

    // With workers pinned and several loops, each loop's thread goes to the CPUs of its own workers
    // (Shard::cpus), so that a request's hops between the loop and its worker stay on one CPU (or one core's
    // hardware threads): on the 2-vCPU benchmark VM a wake-up across vCPUs is dear, and two loops left to the
    // scheduler read anywhere from 38k to 70k req/s by where they settled, 61k to 98k pinned (bench/results/
    // 2026-12-05-loops-beside-workers.md). The HTTP pool's choice; the websockets pool's workers use the
    // same split.
    awaitable<void> pin_loops()
    {
        if (opt.mode != "http" || !pinning.load(std::memory_order_relaxed) || shards.size() < 2 ||
            shards[0]->cpus.empty())
            co_return;
        for (auto &s : shards)
            if (s->opt.num_workers == 0) // fewer workers than loops: a loop without one serves on others'
                co_return;
        detail::loops_pinned(); // processes started from now on get every CPU back (launch.cpp)
        const auto errors = co_await on_each<int>(
            loops(), [this](std::size_t i) { return pin_this_thread(detail::cpu_mask(shards[i]->cpus)); });
        std::string all;
        bool refused = false;
        for (std::size_t i = 0; i < shards.size(); ++i) {
            const auto &set = shards[i]->cpus;
            all += (all.empty() ? "loop " : "; loop ") + std::to_string(i) +
                   (errors[i] != 0
                        ? std::string(" not pinned (") + std::strerror(errors[i]) + ")"
                        : " on CPU" + std::string(set.size() > 1 ? "s " : " ") + detail::cpu_list(set));
            refused = refused || errors[i] != 0;
        }
        const std::string line =
            "event loops pinned beside their workers (" + opt.mode + ".pool.cpu_affinity: auto): " + all;
        if (refused)
            log::warn("pool", line);
        else
            log::info("pool", line);
    }

    // Run on a loop: pins its thread (sched_setaffinity's 0: the calling thread) to `mask`; 0 or the errno.
    static awaitable<int> pin_this_thread(cpu_set_t mask)
    {
        co_return ::sched_setaffinity(0, sizeof mask, &mask) == 0 ? 0 : errno;
    }

    Result<void> resolve_recycle_priority()
    {
        if (opt.recycle_priority == RecyclePriority::normal || opt.debug)
            return {};
        const bool automatic = opt.recycle_priority == RecyclePriority::automatic;
        if (automatic && pinning.load(std::memory_order_relaxed)) {
            // Measured (docs/tuning.md, "max_jobs, fork, recycle_priority"): with workers
            // pinned, a replacement booted at idle priority costs more throughput than one booted at normal
            // priority.
            log::debug("pool", "replacements boot at normal priority (" + opt.mode +
                                   ".pool.recycle_priority: auto, workers pinned)");
            return {};
        }
        if (!detail::can_restore()) {
            const std::string why =
                "restoring a booted worker's priority needs CAP_SYS_NICE or RLIMIT_NICE of at "
                "least 20 - nice (sched(7))";
            const std::string key = opt.mode + ".pool.recycle_priority";
            if (!automatic)
                return fail(key + ": idle: " + why + "; set it to auto or normal");
            log::info("pool", "replacements boot at normal priority (" + key + ": auto): " + why);
            return {};
        }
        idle_recycling.store(true, std::memory_order_relaxed);
        log::debug("pool", "replacements boot and retired workers exit at idle CPU priority (SCHED_IDLE)");
        return {};
    }

    awaitable<Result<void>> start()
    {
        for (auto &s : shards)
            if (auto prepared = s->spawner.prepare(); !prepared)
                co_return prepared;
        resolve_cpu_affinity();
        if (auto prio = resolve_recycle_priority(); !prio)
            co_return prio;
        asio::co_spawn(shards[0]->io, Reaper::run(reaper), log_exceptions{"reaper"});
        // Forked workers are grandchildren of ours (docs/protocol.md §8): as a child subreaper we become
        // their parent when the template's middle process exits, and reap them like the others.
        if (tmpl && ::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
            co_return fail(std::string("http.pool.fork: cannot become a child subreaper: ") +
                           std::strerror(errno));
        auto results =
            co_await on_each<Result<void>>(loops(), [this](std::size_t i) { return shards[i]->start(); });
        for (auto &r : results)
            if (!r)
                co_return r;
        co_await pin_loops();
        co_return Result<void>{};
    }

    awaitable<void> shutdown(clock::time_point deadline)
    {
        co_await on_each<Result<void>>(
            loops(), [this, deadline](std::size_t i) { return shards[i]->shutdown(deadline); });
        if (tmpl)
            co_await tmpl->stop(deadline);
        reaper->stop();
        std::uint64_t dropped = 0, requests = 0, waited = 0, longest = 0, lent = 0, rejected = 0;
        for (auto &s : shards) {
            rejected += s->rejected_total.load();
            dropped += s->allocator.dropped();
            requests += s->requests_total.load();
            waited += s->waited_total.load();
            longest = std::max(longest, s->longest_wait_us.load());
            lent += s->lent_total.load();
        }
        // What a user tuning num_workers and io_threads wants to know: how often a request had to queue.
        log::info("pool", std::to_string(requests) + " request(s) served; " + std::to_string(waited) +
                              " waited for a worker (longest " + std::to_string(longest / 1000) + " ms); " +
                              std::to_string(lent) + " worker(s) lent between loops");
        if (dropped > 0)
            log::info("pool",
                      std::to_string(dropped) +
                          " queued request(s) were not executed: their client left while they waited");
        if (rejected > 0)
            log::info("pool", std::to_string(rejected) +
                                  " request(s) answered 503 at once: the queue was full "
                                  "(max_queue_size)");
    }

    awaitable<Result<ResetReport>> reset(std::string why)
    {
        const std::uint64_t gen = ++generation;
        const auto started = clock::now();
        log::info("pool", "rolling reset (" + why + "): replacing every worker, " +
                              std::to_string(std::max(1u, opt.max_recycling)) + " at a time per loop");
        if (tmpl)
            tmpl->renew(gen); // the next fork starts a template with the new code
        auto results = co_await on_each<Shard::ResetEnd>(
            loops(), [this, gen](std::size_t i) { return shards[i]->reset(gen); });
        ResetReport total;
        for (auto &r : results) {
            if (r.kind == Shard::ResetEnd::Kind::boot_failed) {
                log::error("pool",
                           "rolling reset (" + why +
                               ") stopped: a new worker could not boot (above); the old ones keep serving");
                co_return fail(r.error);
            }
            if (r.kind == Shard::ResetEnd::Kind::stopping) {
                log::error("pool", "rolling reset (" + why + ") stopped: the server is stopping");
                co_return fail("the server is stopping");
            }
            total.replaced += r.report.replaced;
            total.killed += r.report.killed;
        }
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started).count();
        log::info("pool",
                  "rolling reset (" + why + ") done in " + std::to_string(ms) +
                      " ms: " + std::to_string(total.replaced) + " worker(s) replaced" +
                      (total.killed ? ", " + std::to_string(total.killed) + " killed at reset_timeout" : ""));
        co_return total;
    }

    awaitable<std::vector<WorkerInfo>> snapshot(bool memory)
    {
        auto parts = co_await on_each<std::vector<WorkerInfo>>(loops(), [this, memory](std::size_t i) {
            return [](Shard *s, bool with_rss) -> awaitable<std::vector<WorkerInfo>> {
                std::vector<WorkerInfo> out;
                for (const auto &[pid, w] : s->workers)
                    out.push_back(WorkerInfo{pid, state_name(w->state), w->jobs, w->created, s->index,
                                             w->retire || w->stop_on_release, w->cause,
                                             with_rss ? read_rss(pid) : 0, w->cpu});
                co_return out;
            }(shards[i].get(), memory);
        });
        std::vector<WorkerInfo> all;
        for (auto &p : parts)
            all.insert(all.end(), p.begin(), p.end());
        std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) { return a.pid < b.pid; });
        co_return all;
    }

    void kill_all(const std::string &why)
    {
        {
            std::lock_guard lock(mu);
            for (auto &[pid, owner] : exits().owners) {
                if (owner.first != this)
                    continue;
                log::warn("pool", "worker " + std::to_string(pid) + ": " + why + ", killing it");
                if (::kill(-pid, SIGKILL) != 0)
                    ::kill(pid, SIGKILL);
            }
        }
        shards[0]->raise_stop();
        for (std::size_t i = 1; i < shards.size(); ++i)
            asio::post(shards[i]->io, [s = shards[i]] { s->raise_stop(); });
    }
};

bool Shard::first_boot_failure()
{
    return group.first_failure_of(generation);
}

bool Shard::multi() const
{
    return group.shards.size() > 1;
}

std::size_t Shard::queued_everywhere() const
{
    std::size_t n = allocator.waiting();
    if (multi())
        for (const auto &other : group.shards)
            if (other.get() != this)
                n += other->published.waiting.load(std::memory_order_relaxed);
    return n;
}
unsigned Shard::shard_count() const
{
    return static_cast<unsigned>(group.shards.size());
}
Shard &Shard::shard(unsigned i) const
{
    return *group.shards[i];
}
unsigned Shard::group_workers() const
{
    return group.opt.num_workers;
}

bool Shard::hopeless() const
{
    unsigned serving_anywhere = 0;
    bool failing = false;
    for (auto &s : group.shards) {
        serving_anywhere += s->serving_pub.load(std::memory_order_relaxed);
        failing = failing || s->failing_pub.load(std::memory_order_relaxed);
    }
    return serving_anywhere == 0 && failing;
}

bool Shard::idle_recycling() const
{
    return group.idle_recycling.load(std::memory_order_relaxed);
}

void Shard::pin(const WorkerPtr &w)
{
    if (!group.pinning.load(std::memory_order_relaxed) || w->is_template)
        return;
    auto &table = detail::CpuPins::process();
    for (auto &[pid, o] : workers)
        if (o->cpu >= 0 && o != w && (o->retire || o->state == State::stopping || o->state == State::dead))
            table.release(pid);
    if (auto cpu = table.pin(w->pid, cpus)) {
        w->cpu = *cpu;
        log::debug("pool", w->tag() + " pinned to CPU " + std::to_string(*cpu) +
                               (group.shards.size() > 1 ? " (loop " + std::to_string(index) + ")" : ""));
        return;
    }
    const int err = errno;
    if (err == ESRCH) // it died meanwhile: the reaper hears of it
        return;
    if (group.pinning.exchange(false))
        log::warn("pool",
                  w->tag() + ": cannot pin it to a CPU (" + std::strerror(err) + "); " + opt.mode +
                      ".pool.cpu_affinity: workers are left where the scheduler puts them from now on");
}

void Shard::idle_recycling_failed(const WorkerPtr &w)
{
    const int err = errno;
    if (group.idle_recycling.exchange(false))
        log::warn("pool", w->tag() + ": cannot restore its CPU priority after an idle boot (" +
                              std::strerror(err) + "); recycling at normal priority from now on");
}

namespace {
awaitable<ForkTemplate::Forked> fork_from(std::shared_ptr<ForkTemplate> t, ForkTemplate::ChildEnds ends,
                                          std::uint64_t gen)
{
    co_return co_await t->fork(ends, gen);
}

// Three pipes for a new worker: our ends into `w`, the child's ends into `ends`.
Result<void> make_pipes(Worker &w, ForkTemplate::ChildEnds &ends)
{
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
        return fail(std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) {
        ::close(in[0]), ::close(in[1]);
        return fail(std::string("pipe: ") + std::strerror(errno));
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
        ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
        return fail(std::string("pipe: ") + std::strerror(errno));
    }
    ::fcntl(in[1], F_SETFL, ::fcntl(in[1], F_GETFL) | O_NONBLOCK); // written with write_all_fast
    error_code ec;
    w.channel->stdin_pipe().assign(in[1], ec);
    w.channel->stdout_pipe().assign(out[0], ec);
    w.err.assign(err[0], ec);
    ends = {in[0], out[1], err[1]};
    return {};
}
} // namespace

// On loops[0]: every process is started from the thread that owns the signal handling. A fork from another
// loop's thread could copy Asio's process-wide signal state while loops[0] held its lock, and the child,
// before its exec, wait for that lock forever, with the launching loop waiting for the child (seen under
// ASan with two loops).
Result<int> Pool::Impl::launch_on_first(const Spawner &spawner, ForkTemplate::ChildEnds ends, unsigned owner)
{
    // Under the table's lock (and on the reaper's own loop): the reaper, which looks a pid up after
    // waitpid(), cannot miss a worker that exits at once.
    std::lock_guard lock(mu);
    auto pid = spawner.launch_on(ends.in, ends.out, ends.err);
    if (pid)
        exits().owners.emplace(*pid, std::make_pair(this, owner));
    return pid;
}

namespace {
awaitable<Result<int>> launch_from(Pool::Impl *group, const Spawner *spawner, ForkTemplate::ChildEnds ends,
                                   unsigned owner)
{
    co_return group->launch_on_first(*spawner, ends, owner);
}
} // namespace

awaitable<Result<WorkerPtr>> Shard::launch(bool idle)
{
    auto w = std::make_shared<Worker>(io, opt.max_frame_payload);
    ForkTemplate::ChildEnds ends;
    if (auto piped = make_pipes(*w, ends); !piped)
        co_return piped.error();
    Result<int> pid = fail("not started");
    if (index == 0)
        pid = group.launch_on_first(spawner, ends, index);
    else
        pid = co_await asio::co_spawn(shard(0).io, launch_from(&group, &spawner, ends, index), use_awaitable);
    ends.close();
    if (!pid)
        co_return pid.error();
    // Only now, after its exec (which the launch waited for): an idle child before it would keep loop 0
    // waiting while the machine is busy. Its PHP start-up is what runs idle.
    if (idle)
        detail::set_idle(*pid);
    w->pid = *pid;
    w->home = index;
    w->idle_boot = idle;
    co_return w;
}

awaitable<Result<WorkerPtr>> Shard::launch_worker(bool idle)
{
    std::shared_ptr<ForkTemplate> t = group.tmpl;
    if (!t || t->disabled())
        co_return co_await launch(idle);
    auto w = std::make_shared<Worker>(io, opt.max_frame_payload);
    ForkTemplate::ChildEnds ends;
    if (auto piped = make_pipes(*w, ends); !piped) {
        log::warn("pool", "http.pool.fork: " + piped.error().message + "; starting the worker on its own");
        co_return co_await launch(idle);
    }
    // (GCC 12 miscompiles co_await inside ?:, destroying a temporary twice: plain ifs.)
    ForkTemplate::Forked forked;
    if (index == 0)
        forked = co_await t->fork(ends, generation);
    else
        forked = co_await asio::co_spawn(shard(0).io, fork_from(t, ends, generation), use_awaitable);
    if (forked.pid == 0 && (stopping.raised() || forked.boot_failed))
        co_return fail(
            forked.error); // the template could not boot the code: neither can a worker (said once)
    if (forked.pid == 0) {
        log::debug("pool", "not forked (" + forked.error + "): starting the worker on its own");
        co_return co_await launch(idle);
    }
    const Result<int> pid = forked.pid;
    w->pid = *pid;
    w->home = index;
    // Its boot (the estimate that starts max_jobs replacements early, the boot-time histogram) is the fork
    // and its handshake: not the template's own start, which the first forks wait for (~40 ms of PHP boot
    // against ~2 ms for a fork), nor another fork's turn.
    w->started = forked.sent;
    if (auto status =
            group.claim(w->pid, index)) // it ended before we knew it: its exit, once it is registered
        asio::post(io, [self = shared_from_this(), p = w->pid, st = *status] { self->on_exit(p, st); });
    co_return w;
}

awaitable<Shard::Step> Shard::run_elsewhere(const relay::RequestContext &ctx, BodyRef body,
                                            std::string &body_out, StreamSink *sink, Reply &res)
{
    std::optional<ProxySink> proxy;
    for (unsigned i = 0; i < shard_count(); ++i) {
        Shard &other = shard(i);
        if (i == index || other.published.idle.load() == 0)
            continue;
        if (sink && !proxy)
            proxy.emplace(*sink, co_await asio::this_coro::executor);
        Step step = co_await asio::co_spawn(
            other.io, other.run_idle(ctx, body, body_out, proxy ? &*proxy : nullptr, res), use_awaitable);
        if (step != Step::none)
            co_return step;
    }
    co_return Step::none;
}

awaitable<Shard::Step> Shard::run_on_home(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body,
                                          std::string &body_out, StreamSink *sink, Reply &res)
{
    Shard &home = shard(w->home);
    std::optional<ProxySink> proxy;
    if (sink)
        proxy.emplace(*sink, co_await asio::this_coro::executor);
    co_return co_await asio::co_spawn(
        home.io, home.run(w, ctx, body, body_out, proxy ? &*proxy : nullptr, res), use_awaitable);
}

namespace {
std::vector<asio::io_context *> one_loop(asio::io_context &io)
{
    return {&io};
}
} // namespace

Pool::Pool(asio::io_context &io, Options options) : Pool(one_loop(io), std::move(options)) {}

Pool::Pool(const std::vector<asio::io_context *> &loops, Options options)
    : impl_(std::make_shared<Impl>(loops, std::move(options)))
{
}

void Pool::abandon()
{
    for (auto &s : impl_->shards)
        for (auto &[pid, w] : s->workers)
            w->channel->abandon();
}

Pool::~Pool()
{
    abandon();
    if (impl_->tmpl)
        impl_->tmpl->kill();
    // Whatever is still alive dies with us (the children also have PR_SET_PDEATHSIG), and no longer counts
    // on its CPU for another pool of this process.
    for (auto &s : impl_->shards)
        for (auto &[pid, w] : s->workers) {
            w->signal(SIGKILL);
            if (w->cpu >= 0)
                detail::CpuPins::process().release(pid);
        }
    detail::CpuPins::process().unreserve(impl_->reserved_cpus);
}

awaitable<Result<void>> Pool::start()
{
    return impl_->start();
}

awaitable<Reply> Pool::exec(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                            StreamSink *sink, unsigned loop)
{
    return impl_->shards[loop]->exec(ctx, body, body_out, sink);
}

awaitable<void> Pool::shutdown(std::chrono::steady_clock::time_point deadline)
{
    return impl_->shutdown(deadline);
}

awaitable<void> Pool::shutdown()
{
    return impl_->shutdown(std::chrono::steady_clock::now() + impl_->opt.destroy_timeout);
}

void Pool::kill_all(const std::string &why)
{
    impl_->kill_all(why);
}

awaitable<Result<ResetReport>> Pool::reset(std::string why)
{
    return impl_->reset(std::move(why));
}

awaitable<std::vector<WorkerInfo>> Pool::snapshot(bool memory)
{
    return impl_->snapshot(memory);
}

std::vector<WorkerInfo> Pool::workers() const
{
    std::vector<WorkerInfo> out;
    for (auto &s : impl_->shards)
        for (const auto &[pid, w] : s->workers)
            out.push_back(WorkerInfo{pid, state_name(w->state), w->jobs, w->created});
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.pid < b.pid; });
    return out;
}

unsigned Pool::serving_workers() const
{
    unsigned n = 0;
    for (auto &s : impl_->shards)
        n += s->serving_pub.load(std::memory_order_relaxed);
    return n;
}

namespace {
template <typename F> std::uint64_t sum(const std::vector<std::shared_ptr<Shard>> &shards, F f)
{
    std::uint64_t n = 0;
    for (auto &s : shards)
        n += f(*s);
    return n;
}
} // namespace

std::uint64_t Pool::spawned_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.spawned_total.load(); });
}
std::uint64_t Pool::recycled_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.recycled_total.load(); });
}
std::uint64_t Pool::dropped_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.allocator.dropped(); });
}
std::uint64_t Pool::waited_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.waited_total.load(); });
}
std::uint64_t Pool::lent_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.lent_total.load(); });
}

PoolStats Pool::stats() const
{
    PoolStats st;
    for (auto &sp : impl_->shards) {
        const Shard &s = *sp;
        st.requests += s.requests_total.load(std::memory_order_relaxed);
        st.waited += s.waited_total.load(std::memory_order_relaxed);
        st.rejected += s.rejected_total.load(std::memory_order_relaxed);
        st.jobs += s.jobs_total.load(std::memory_order_relaxed);
        st.spawned += s.spawned_total.load(std::memory_order_relaxed);
        for (unsigned c = 0; c < static_cast<unsigned>(Cause::count_); ++c)
            st.exits[c] += s.exits_total[c].load(std::memory_order_relaxed);
        s.queue_wait.read(st.queue_wait);
        s.boot_time.read(st.boot_time);
    }
    st.queued = impl_->shards[0]->queued_everywhere();
    return st;
}

} // namespace ferry::pool
