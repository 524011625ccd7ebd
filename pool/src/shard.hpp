// One event loop's part of a pool (internal to pool/): its workers and their transitions, its allocator,
// spawner and supervisor. Everything of a Shard runs on its loop's thread; other loops read only `published`,
// `serving_pub` and `failing_pub`, and reach a shard by posting to its loop. Its roles, one file each:
//   shard.cpp     the worker set: keeping the share serving, recycling and stopping, exits, start/shutdown
//   dispatch.cpp  a request: allocate, write, read, retry on another worker; its reply pulled and settled
//   lending.cpp   workers and requests between loops (docs/architecture.md, "Several loops")
//   boot.cpp      spawning and booting a worker, boot failures, idle-priority boots
//   reset.cpp     rolling reset
//   placement.cpp CPU pinning and recycle priority
// The pool that joins the shards is Pool::Impl (group.hpp).
#pragma once

#include "ferry/pool/pool.hpp"

#include "allocator.hpp"
#include "condition.hpp"
#include "exchange.hpp"
#include "spawner.hpp"
#include "supervisor.hpp"
#include "worker.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry::pool {

using clock = std::chrono::steady_clock;

struct Shard : std::enable_shared_from_this<Shard> {
    // Loop `i` of `g`, on `io`, with `o` (num_workers: this loop's share).
    Shard(Pool::Impl &g, unsigned i, asio::io_context &io, Options o);

    Pool::Impl &group;
    const unsigned index; // the loop's
    // Options::cpu_affinity: the CPUs of this loop (CpuPins::loop_cpus), where its workers are pinned and,
    // for the HTTP pool, the loop's thread too; empty: any CPU of the table (one loop, or more loops than
    // CPUs). Set by resolve_cpu_affinity() before the first worker is pinned.
    std::vector<int> cpus;
    asio::io_context &io;
    Options opt;       // num_workers: this shard's share
    Registry workers;  // every live process of this shard
    Flag stopping;     // shutdown() or kill_all() began
    Condition changed; // a worker became ready or exited, a boot failed, a spawn ended, a stop began
    Allocator allocator;
    Spawner spawner;
    Supervisor supervisor;
    WorkerExchange exchange;
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
    unsigned serving(bool with_retiring) const;

    // Keeps this shard's share of num_workers serving or booting (retiring ones do not count): a missing
    // worker is started at once; replacements for workers that still serve (max_jobs, a reset), max_recycling
    // at a time.
    void maintain();

    // A worker of this shard has nothing to do: stop it, hand it to a waiter (here or, with several loops,
    // on the loop that has waited longest), or park it (watched: output while idle is caught as it arrives).
    void make_available(const WorkerPtr &w);

    // Nobody wants the worker now: it waits idle, watched (true), or in debug it stops (false: no worker
    // waits with the code as it was when it booted).
    bool park(const WorkerPtr &w);

    // ---- several loops ----------------------------------------------------------------------------

    // Another loop whose oldest waiting request should get a worker freed here: the one that has waited
    // longest, if it has waited longer than this loop's own oldest by lend_margin (none waiting here: any).
    Shard *waiting_elsewhere();

    // Hands a worker of this shard (state working) to a request waiting on `target`'s loop; the request runs
    // it here (run_on_home) and `target` sends it back if nobody waits there any more.
    void lend(const WorkerPtr &w, Shard &target);

    // On the borrowing loop.
    void accept_lent(const WorkerPtr &w);

    // A worker handed to a request that no longer wants it: to its own shard's make_available().
    void give_back(const WorkerPtr &w);

    // A request just queued here: every other loop with an idle worker is asked to lend one (those that
    // arrive when nobody waits any more go back).
    void queued();

    // On the lending loop.
    void lend_idle_to(Shard &target);

    unsigned shard_count() const;

    // ---- recycling and stopping -------------------------------------------------------------------

    // A request is done and the worker is clean: count the job, then recycle, stop or reuse it.
    void release(const WorkerPtr &w);

    // A new worker is ready: retire one worker that waits for its replacement, an idle one first, the oldest
    // generation first (under max_jobs churn a reset's old workers must not wait behind recycled new ones).
    void retire_one();

    // The replacement of `w` is ready. Idle, it stops now. Busy, it stops when its request is done (one a
    // reset made stale has reset_timeout for it); but one replaced ahead of its max_jobs (its replacement
    // started early) serves on while requests wait for a worker, up to max_jobs (Supervisor::job_done).
    void replaced(const WorkerPtr &w);

    // Workers waiting for a replacement are kept only while the fresh ones are too few: with enough, they all
    // go (a worker that booted while a reset began arrives stale when its replacements are already there; it
    // would otherwise idle on and the reset would wait for it forever).
    void shed_surplus();

    // ---- rolling reset ----------------------------------------------------------------------------

    // Workers older than `gen` that still serve (spawning ones included) or, with `exiting`, are still alive
    // at all: a reset to `gen` is done when none is left.
    unsigned older_than(std::uint64_t gen, bool exiting = false) const;

    // How this shard's part of a reset ended.
    struct ResetEnd {
        enum class Kind { done, boot_failed, stopping } kind = Kind::done;
        ResetReport report;
        std::string error; // boot_failed: the boot failure's message
    };

    awaitable<ResetEnd> reset(std::uint64_t gen);

    // Causes of a worker marked for replacement that still serves: what ends it first is counted instead.
    static bool replacing(Cause c)
    {
        return c == Cause::max_jobs || c == Cause::ttl || c == Cause::idle_ttl || c == Cause::memory ||
               c == Cause::reset;
    }

    void start_stop(const WorkerPtr &w);

    // The worker broke mid-request or at boot: kill it now; the reaper replaces it. `why` is counted at its
    // exit unless a cause was already decided (exec_ttl).
    void kill_broken(const WorkerPtr &w, Cause why);

    // Output that no request asked for (relay::Channel::on_unexpected).
    void unexpected_output(const WorkerPtr &w, const std::string &what);

    // The reaper saw a child of this shard end.
    void on_exit(int pid, int status);

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
    void restore_priority(const WorkerPtr &w, const std::string &why = {});

    // A worker whose boot is done goes to the CPU with the fewest workers that still count
    // (Options::cpu_affinity). This shard's workers marked for replacement or stopping since the last pin
    // give theirs up first: a replacement gets the CPU of the worker it replaces.
    void pin(const WorkerPtr &w);

    // Every worker of this shard still booting at idle priority is raised to normal.
    void raise_idle_boots(const std::string &why);

    // An idle boot that has not finished within idle_boot_limit is raised to normal priority: a machine
    // busy enough to leave it no spare CPU must not turn it into a boot failure (boot_timeout).
    static awaitable<void> limit_idle_boot(std::shared_ptr<Shard> self, std::weak_ptr<Worker> weak);

    static awaitable<void> spawn_worker(std::shared_ptr<Shard> self, bool idle);

    // A stop's SIGTERM to a booting worker (no request to lose): if it has not ended a second later (PHP may
    // hold the signal back while it starts), SIGKILL, rather than waiting for its boot to end.
    void stop_booting(const WorkerPtr &w);
    static awaitable<void> kill_boot_after_stop(WorkerPtr w);

    bool first_boot_failure(); // of this reset, on any loop

    // A new worker failed to boot: the workers still serving keep serving (retiring them for a reset or
    // max_jobs would end the last good ones) until a reset tries again. True when there were such workers.
    bool hold_replacements();

    void boot_failed(const std::string &msg);

    // ---- requests ---------------------------------------------------------------------------------

    enum class Step {
        done,    // `res` is the answer
        retry,   // the worker refused or could not take the request: another worker gets it
        skipped, // the worker was found broken before the request was written: another one gets it
        none,    // (another loop) no idle worker there
    };

    // No idle worker on any loop and the last boots failed: answer at once instead of waiting.
    bool hopeless() const;

    awaitable<void> exec(const relay::RequestContext &ctx, BodyRef body, Reply &res, Client client);

    unsigned group_workers() const;

    // One request on a worker of this shard (its state working), on this shard's loop: three plain steps
    // around its two waits (writing the request, reading the reply), so that exec() runs a request on its
    // own loop's worker without a coroutine frame for it (that frame cost ~700 instructions per request,
    // callgrind); run() is the same for a request from another loop.
    // begin(): false when the worker is broken (the request is then Step::skipped).
    bool begin(const WorkerPtr &w, const relay::RequestContext &ctx, BodyRef body, Client client, Reply &res,
               RequestFrame &frame);

    Step write_failed(const WorkerPtr &w, error_code wec);

    // The exchange's verdict on the reply's first piece: a reply that holds its worker gets it (and this
    // shard), anything else is settled().
    Step finished(const WorkerPtr &w, AfterReply after, Reply &res);
    // The worker's fate once its reply is done with it (release, stop, kill; a retry for the request).
    Step settled(const WorkerPtr &w, AfterReply after);

    awaitable<Step> run(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body, Client client,
                        Reply &res);

    // On another loop: an idle worker there, if there is one, runs the request.
    awaitable<Step> run_idle(const relay::RequestContext &ctx, BodyRef body, Client client, Reply &res);

    // This loop has no idle worker: run the request on another loop that has one (the first that still has
    // one when the request gets there). The reply is read on that loop (Reply::next goes there).
    awaitable<Step> run_elsewhere(const relay::RequestContext &ctx, BodyRef body, Client client, Reply &res);
    // A worker another loop lent: the request runs on the worker's loop.
    awaitable<Step> run_on_home(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body, Client client,
                                Reply &res);

    // Reply::next() for a reply that holds a worker of this shard, on this shard's loop.
    awaitable<void> pull(Reply *res); // (a pointer: GCC 12 and reference parameters of member coroutines)
    // Reply::finish() for a reply that held `w`, on this shard's loop: `ended` (its last frame was read) the
    // exchange closes and the worker is released; else its stream is stopped first (stop_stream).
    void settle(const WorkerPtr &w, bool ended);
    static awaitable<void> stop_stream(std::shared_ptr<Shard> self, WorkerPtr w);

    // ---- lifecycle --------------------------------------------------------------------------------

    // Starts this shard's share of the workers and waits until they are ready, one failed to boot, or a
    // stop began.
    awaitable<Result<void>> start();

    // debug: the workers that proved the app boots are stopped (they loaded the code as it was at start);
    // from now on each request gets a worker started for it.
    void start_on_demand();

    // Stops this shard's workers by `deadline`: idle ones get the stop frame now, busy ones when their
    // request is done; whatever still runs at the deadline is killed, with a log line each.
    awaitable<Result<void>> shutdown(clock::time_point deadline);

    // The server stops now (its workers are being killed): no replacement, and the requests waiting for a
    // worker fail with `why`.
    void stop_now(const std::string &why)
    {
        stopping.raise();
        allocator.fail_waiters("server is stopping now (" + why + ")");
        changed_now();
    }
};

} // namespace ferry::pool
