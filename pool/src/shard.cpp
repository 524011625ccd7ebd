// A shard's worker set and its transitions: keeping its share of num_workers serving, making a worker
// available (to a waiter, another loop, or idle), recycling and stopping, kills, exits, and the shard's
// start and shutdown. The state a worker goes through is in worker.hpp.
#include "group.hpp"

#include "affinity.hpp"
#include "ferry/base/log.hpp"
#include "priority.hpp"

#include <csignal>
#include <sys/wait.h>

namespace ferry::pool {

Shard::Shard(Pool::Impl &g, unsigned i, asio::io_context &io_, Options o)
    : group(g), index(i), io(io_), opt(std::move(o)), stopping(io_), changed(io_),
      allocator(io_, opt.allocate_timeout), spawner(io_, opt, *g.host, stopping, g.boot_report),
      supervisor(opt, workers, stopping, boot_broken), exchange(opt)
{
    supervisor.on_marked = [this] { maintain(); };
    allocator.discard = [this](const WorkerPtr &w) { kill_broken(w, Cause::error); };
    allocator.give_back = [this](const WorkerPtr &w) { give_back(w); };
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

unsigned Shard::serving(bool with_retiring) const
{
    unsigned n = 0;
    for (const auto &[pid, w] : workers)
        if ((w->state() == State::ready || w->state() == State::working) && (with_retiring || !w->going()))
            ++n;
    return n;
}

void Shard::maintain()
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

void Shard::make_available(const WorkerPtr &w)
{
    if (w->state() == State::dead || w->state() == State::stopping || w->exited())
        return; // on its way out: it must not take a request after its stop frame
    if (w->recycle() == Recycle::on_release || stopping.raised()) {
        start_stop(w);
        return;
    }
    // Its early replacement is ready: it serves on only while requests wait for a worker.
    if (w->recycle() == Recycle::replaced && allocator.waiting() == 0 && (!multi() || !waiting_elsewhere())) {
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

bool Shard::park(const WorkerPtr &w)
{
    if (on_demand) {
        w->blame(Cause::debug);
        start_stop(w);
        return false;
    }
    w->channel().watch();
    return true;
}

void Shard::release(const WorkerPtr &w)
{
    bump(jobs_total);
    switch (supervisor.job_done(*w)) {
    case Supervisor::AfterJob::keep:
        // Past max_jobs by half (it is stopped at twice): a replacement still booting at idle priority
        // gets normal priority, so that no request comes to wait for it.
        if (w->going() && w->max_jobs() != 0 && w->jobs() == w->max_jobs() + w->max_jobs() / 2)
            raise_idle_boots("a worker it replaces is 50 % past max_jobs");
        break;
    case Supervisor::AfterJob::retire:
        if (w->cause() == Cause::max_jobs)
            recycled_total.fetch_add(1, std::memory_order_relaxed);
        maintain(); // its replacement boots while it keeps serving
        break;
    case Supervisor::AfterJob::stop:
        start_stop(w);
        return;
    }
    make_available(w);
}

void Shard::retire_one()
{
    WorkerPtr idle, busy;
    for (auto &[pid, w] : workers) {
        if (w->recycle() != Recycle::marked || w->state() == State::stopping || w->state() == State::dead)
            continue;
        WorkerPtr &pick = w->state() == State::ready ? idle : busy;
        if (!pick || w->generation() < pick->generation())
            pick = w;
    }
    if (idle)
        replaced(idle);
    else if (busy)
        replaced(busy);
}

void Shard::replaced(const WorkerPtr &w)
{
    if (w->state() == State::ready) {
        start_stop(w);
        return;
    }
    if (w->cause() == Cause::max_jobs && w->max_jobs() != 0 && w->jobs() < w->max_jobs()) {
        w->recycle_to(Recycle::replaced);
        return;
    }
    w->recycle_to(Recycle::on_release);
    if (w->generation() < generation)
        w->must_stop_by(clock::now() + opt.reset_timeout);
}

void Shard::shed_surplus()
{
    if (serving(false) < opt.num_workers)
        return;
    std::vector<WorkerPtr> surplus;
    for (auto &[pid, w] : workers)
        if (w->recycle() == Recycle::marked && (w->state() == State::ready || w->state() == State::working))
            surplus.push_back(w);
    for (auto &w : surplus)
        replaced(w);
}

void Shard::start_stop(const WorkerPtr &w)
{
    w->exec().clear();
    if (w->state() == State::stopping || w->state() == State::dead)
        return;
    allocator.remove(w);
    w->to(State::stopping);
    if (w->going() && w->cause() != Cause::reset && !stopping.raised() && idle_recycling())
        detail::set_idle(w->pid()); // a replaced worker's exit (shutdown functions, freeing its memory)
    auto deadline = std::min(clock::now() + opt.destroy_timeout, stop_deadline);
    asio::co_spawn(io, stop_worker(w, deadline, std::shared_ptr<const Flag>(shared_from_this(), &stopping)),
                   log_exceptions{"stop worker"});
    maintain();
    changed.notify(); // a reset waits for old workers to be on their way out
}

void Shard::kill_broken(const WorkerPtr &w, Cause why)
{
    if (w->cause() == Cause::none || replacing(w->cause()))
        w->blame(why);
    w->exec().clear();
    allocator.remove(w);
    if (w->state() != State::dead)
        w->to(State::stopping);
    w->signal(SIGKILL);
    maintain();
}

void Shard::unexpected_output(const WorkerPtr &w, const std::string &what)
{
    if (w->state() == State::stopping || w->state() == State::dead || stopping.raised())
        return;
    log::error("pool", w->tag() + " wrote " + what + "; retiring it");
    kill_broken(w, Cause::error);
}

void Shard::on_exit(int pid, int status)
{
    auto it = workers.find(pid);
    if (it == workers.end())
        return;
    WorkerPtr w = it->second;
    workers.erase(it);
    if (w->cpu() >= 0)
        group.host->cpus().release(pid);
    bool expected = w->state() == State::stopping || w->state() == State::dead;
    // Exited before its handshake: a boot failure, which the handshake's failure reports with its output,
    // or the stop's SIGTERM to a booting worker; never unexpected.
    const bool booting = w->state() == State::spawning;
    if (booting)
        w->blame_if_none(stopping.raised() ? Cause::shutdown : Cause::boot_failure);
    w->blame_if_none(expected ? (stopping.raised() ? Cause::shutdown : Cause::worker_stop) : Cause::crash);
    // Marked for replacement (a limit reached, its replacement started early) but still serving when it
    // died by itself: a crash all the same.
    if (!expected && replacing(w->cause()))
        w->blame(Cause::crash);
    // Killed for breaking off mid-request, it had in fact died by itself (its stdout closed): a crash.
    if (w->cause() == Cause::error && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
        w->blame(Cause::crash);
    if (!w->is_template)
        bump(exits_total[static_cast<unsigned>(w->cause())]);
    std::string what = w->tag() + " " + describe_status(status);
    if ((expected && WIFEXITED(status) && WEXITSTATUS(status) == 0) || booting ||
        w->cause() == Cause::boot_failure)
        log::debug("pool", what);
    else if (expected)
        log::info("pool", what);
    else
        log::warn("pool", what + " unexpectedly while " + state_name(w->state()));
    w->on_exit(status); // what it started (exec('sleep 600 &')) ends with it
    if (w->killed_by_reset())
        ++reset_kills;
    allocator.remove(w);
    // A working worker's request notices EOF on its stdout and answers 502 itself.
    if (w->state() != State::working)
        w->to(State::dead);
    changed_now();
    maintain();
}

awaitable<Result<void>> Shard::start()
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

void Shard::start_on_demand()
{
    on_demand = true;
    std::vector<WorkerPtr> idle;
    for (auto &[pid, w] : workers)
        if (w->state() == State::ready)
            idle.push_back(w);
    for (auto &w : idle) {
        w->blame(Cause::debug);
        start_stop(w);
    }
}

awaitable<Result<void>> Shard::shutdown(clock::time_point deadline)
{
    stop_deadline = deadline;
    stopping.raise();
    changed_now();
    allocator.fail_waiters("server is shutting down");
    std::vector<WorkerPtr> all;
    for (auto &[pid, w] : workers)
        all.push_back(w);
    for (auto &w : all) {
        if (w->state() == State::ready)
            start_stop(w);
        else if (w->state() == State::working)
            w->recycle_to(Recycle::on_release);
        else if (w->state() == State::spawning)
            stop_booting(w);
    }
    while ((!workers.empty() || spawning > 0) && clock::now() < deadline)
        co_await changed.wait_until(deadline);
    auto budget = std::to_string(opt.destroy_timeout.count());
    for (auto &[pid, w] : workers) {
        log::warn("pool", w->tag() + " still " + state_name(w->state()) +
                              " at the stop deadline (destroy_timeout " + budget + " ms): killing it");
        w->signal(SIGKILL);
    }
    auto reap_by = clock::now() + std::chrono::seconds(1);
    while (!workers.empty() && clock::now() < reap_by)
        co_await changed.wait_until(reap_by);
    co_return Result<void>{};
}

} // namespace ferry::pool
