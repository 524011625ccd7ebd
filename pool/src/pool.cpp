// The pool: wires the roles together and owns the lifecycle. The roles, one file each:
//   worker      one process: pid, state, signals, jobs, how it is stopped
//   spawner     command, back-off after boot failures, launching, the PID handshake
//   reaper      SIGCHLD reaping and stderr forwarding
//   allocator   idle set and the FIFO of waiting requests
//   exchange    one request on one worker (docs/protocol.md §2-§4)
//   supervisor  max_jobs recycling, exec_ttl, exec_warn
// Here: the worker set and its transitions (available, retiring, stopping, broken, exited), keeping
// num_workers serving, exec() (allocate, write, read, retry) and start/shutdown/kill_all/abandon.
#include "ferry/pool/pool.hpp"

#include "allocator.hpp"
#include "event.hpp"
#include "exchange.hpp"
#include "ferry/relay/log.hpp"
#include "reaper.hpp"
#include "spawner.hpp"
#include "supervisor.hpp"
#include "worker.hpp"

#include <algorithm>
#include <csignal>
#include <sys/wait.h>

namespace ferry::pool {

namespace {
using clock = std::chrono::steady_clock;
} // namespace

struct Pool::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, Options o)
        : io(io_), opt(std::move(o)), stopping(io_), changed(io_), allocator(io_, opt.allocate_timeout),
          spawner(io_, opt, stopping), supervisor(opt, workers, stopping),
          reaper(io_, [this](int pid, int status) { on_exit(pid, status); }), exchange(opt)
    {
        allocator.discard = [this](const WorkerPtr &w) { kill_broken(w); };
        allocator.give_back = [this](const WorkerPtr &w) { make_available(w); };
    }

    asio::io_context &io;
    Options opt;
    Registry workers; // every live process
    Flag stopping;    // shutdown() or kill_all() began
    Event changed;    // a worker became ready or exited, a boot failed, a spawn ended, a stop began
    Allocator allocator;
    Spawner spawner;
    Supervisor supervisor;
    Reaper reaper;
    Exchange exchange;
    unsigned spawning = 0; // spawn coroutines in progress, back-off included
    clock::time_point stop_deadline = clock::time_point::max();
    std::uint64_t spawned_total = 0;
    std::uint64_t recycled_total = 0;

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

    // Keeps num_workers workers serving or booting (retiring ones do not count).
    void maintain()
    {
        if (stopping.raised())
            return;
        unsigned have = spawning + serving(false);
        for (unsigned i = have; i < opt.num_workers; ++i) {
            ++spawning;
            asio::co_spawn(io, spawn_worker(shared_from_this()), log_exceptions{"spawn worker"});
        }
    }

    // A worker has nothing to do: stop it, hand it to a waiter, or park it (watched: output while idle is
    // caught as it arrives).
    void make_available(const WorkerPtr &w)
    {
        if (w->state == State::dead || w->exited)
            return;
        if (w->stop_on_release || stopping.raised()) {
            start_stop(w);
            return;
        }
        if (!allocator.offer(w))
            w->channel->watch();
    }

    // A request is done and the worker is clean: count the job, then recycle, stop or reuse it.
    void release(const WorkerPtr &w)
    {
        switch (supervisor.job_done(*w)) {
        case Supervisor::AfterJob::keep:
            break;
        case Supervisor::AfterJob::retire:
            ++recycled_total;
            maintain(); // its replacement boots while it keeps serving
            break;
        case Supervisor::AfterJob::stop:
            start_stop(w);
            return;
        }
        make_available(w);
    }

    // A new worker is ready: retire one worker that waits for its replacement.
    void retire_one()
    {
        for (auto &[pid, w] : workers) {
            if (!w->retire || w->stop_on_release || w->state == State::stopping || w->state == State::dead)
                continue;
            if (w->state == State::ready)
                start_stop(w);
            else
                w->stop_on_release = true;
            return;
        }
    }

    void start_stop(const WorkerPtr &w)
    {
        w->exec_ctx = nullptr;
        if (w->state == State::stopping || w->state == State::dead)
            return;
        allocator.remove(w);
        w->state = State::stopping;
        auto deadline = std::min(clock::now() + opt.destroy_timeout, stop_deadline);
        asio::co_spawn(io,
                       stop_worker(w, deadline, std::shared_ptr<const Flag>(shared_from_this(), &stopping)),
                       log_exceptions{"stop worker"});
        maintain();
    }

    // The worker broke mid-request or at boot: kill it now; the reaper replaces it.
    void kill_broken(const WorkerPtr &w)
    {
        w->exec_ctx = nullptr;
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
        kill_broken(w);
    }

    // The reaper saw a child end.
    void on_exit(int pid, int status)
    {
        auto it = workers.find(pid);
        if (it == workers.end())
            return;
        WorkerPtr w = it->second;
        workers.erase(it);
        bool expected = w->state == State::stopping || w->state == State::dead;
        std::string what = w->tag() + " " + describe_status(status);
        if (expected && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            log::debug("pool", what);
        else if (expected)
            log::info("pool", what);
        else
            log::warn("pool", what + " unexpectedly while " + state_name(w->state));
        w->on_exit(status); // what it started (exec('sleep 600 &')) ends with it
        allocator.remove(w);
        // A working worker's request notices EOF on its stdout and answers 502 itself.
        if (w->state != State::working)
            w->state = State::dead;
        changed.notify();
        maintain();
    }

    // ---- spawning ---------------------------------------------------------------------------------

    static awaitable<void> spawn_worker(std::shared_ptr<Impl> self)
    {
        co_await self->spawner.back_off();
        if (self->stopping.raised()) {
            --self->spawning;
            self->changed.notify();
            co_return;
        }
        auto launched = self->spawner.launch();
        if (!launched) {
            --self->spawning;
            self->boot_failed(launched.error().message);
            co_return;
        }
        WorkerPtr w = *launched;
        ++self->spawned_total;
        self->workers.emplace(w->pid, w);
        w->channel->on_unexpected = [weak_self = std::weak_ptr<Impl>(self),
                                     weak_w = std::weak_ptr<Worker>(w)](const std::string &what) {
            auto s = weak_self.lock();
            auto wp = weak_w.lock();
            if (s && wp)
                s->unexpected_output(wp, what);
        };
        w->channel->watch();
        asio::co_spawn(self->io, forward_stderr(w), log_exceptions{"worker stderr"});
        log::debug("pool", w->tag() + " spawned");

        auto booted = co_await self->spawner.handshake(w);
        --self->spawning;
        if (!booted && self->stopping.raised()) {
            self->kill_broken(w); // stopped while booting: not a boot failure
            self->changed.notify();
            co_return;
        }
        if (!booted) {
            // Give the process a moment to exit by itself so the message can say how it ended (its own exit
            // code, not our SIGKILL) and what it printed; then make sure it is gone.
            if (w->state != State::dead)
                w->state = State::stopping;
            co_await wait_exit(w, std::chrono::milliseconds(200));
            self->kill_broken(w);
            co_await wait_exit(w, std::chrono::milliseconds(500));
            self->boot_failed(Spawner::boot_failure(*w, booted.error().message));
            co_return;
        }
        self->spawner.booted();
        w->max_jobs = self->supervisor.jittered_max_jobs();
        log::info("pool", w->tag() + " ready (" + (w->codec == relay::Codec::msgpack ? "msgpack" : "json") +
                              " context)");
        w->state = State::ready; // counted as serving before retire_one() asks maintain() for more
        self->retire_one();
        self->make_available(w);
        self->changed.notify();
    }

    void boot_failed(const std::string &msg)
    {
        spawner.boot_failed(msg);
        log::error("pool", msg);
        if (serving(true) == 0 && allocator.waiting() > 0)
            allocator.fail_waiters("no worker available: " + msg);
        changed.notify();
        maintain();
    }

    // ---- requests ---------------------------------------------------------------------------------

    awaitable<Reply> exec(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                          StreamSink *sink)
    {
        Reply res;
        unsigned skipped_broken = 0;
        // A worker may ask to stop instead of answering: the same request goes to another worker.
        for (unsigned attempt = 0; attempt <= opt.num_workers + 1; ++attempt) {
            WorkerPtr w = stopping.raised() ? nullptr : allocator.take_idle(); // no coroutine frame
            if (!w) {
                if (stopping.raised()) {
                    res.outcome = Outcome::no_worker;
                    res.message = "server is shutting down";
                    co_return res;
                }
                if (serving(true) == 0 && spawner.failures() > 0) {
                    res.outcome = Outcome::no_worker;
                    res.message = "no worker available: " + spawner.last_error();
                    co_return res;
                }
                Allocation a = co_await allocator.wait(sink);
                if (!a.worker) {
                    res.outcome = a.outcome;
                    res.message = std::move(a.why);
                    co_return res;
                }
                w = std::move(a.worker);
            }
            if (w->broken()) {
                // It wrote more after its last reply (seen by the read that follows every reply, before this
                // request was written): retired, and this request goes to another worker.
                kill_broken(w);
                if (++skipped_broken <= 2 * opt.num_workers)
                    --attempt; // not the worker's refusal: does not count against the retry bound
                continue;
            }
            res.worker_pid = w->pid;
            RequestFrame frame;
            exchange.prepare(*w, ctx, body, frame);
            w->exec_ctx = &ctx;
            w->exec_started = supervisor.now(); // the supervisor's own tick: no clock read per request
            w->exec_warned = false;
            error_code wec = co_await w->channel->write(frame.parts());
            if (!wec && body.fd >= 0)
                wec = co_await Exchange::write_file(w->channel->stdin_pipe(), body.fd, body.size);
            if (wec) {
                // The worker died before it could read the request (e.g. while idle, its exit not reaped
                // yet): nothing ran, so another worker gets it.
                log::warn("pool", w->tag() + ": writing the request failed (" + wec.message() +
                                      "); retrying on another worker");
                kill_broken(w);
                continue;
            }
            switch (co_await exchange.read_reply(w, res, body_out, sink)) {
            case After::release:
                release(w);
                co_return res;
            case After::kill:
                kill_broken(w);
                co_return res;
            case After::kill_later: // the client gets its 504 before the worker is killed
                asio::post(io, [self = shared_from_this(), w] { self->kill_broken(w); });
                co_return res;
            case After::stop_retry:
                ++recycled_total;
                start_stop(w);
                continue;
            case After::kill_retry:
                ++recycled_total;
                kill_broken(w);
                continue;
            }
        }
        res.outcome = Outcome::no_worker;
        res.message = "every worker asked to stop instead of answering";
        co_return res;
    }

    // ---- lifecycle --------------------------------------------------------------------------------

    awaitable<Result<void>> start()
    {
        if (auto prepared = spawner.prepare(); !prepared)
            co_return prepared;
        asio::co_spawn(io, Reaper::run({shared_from_this(), &reaper}), log_exceptions{"reaper"});
        asio::co_spawn(io, Supervisor::run({shared_from_this(), &supervisor}), log_exceptions{"supervisor"});
        maintain();
        for (;;) {
            if (stopping.raised())
                co_return fail("stopped while starting");
            if (serving(true) >= opt.num_workers)
                co_return Result<void>{};
            if (spawner.failures() > 0)
                co_return fail(spawner.last_error());
            co_await changed.wait_until(clock::time_point::max());
        }
    }

    // Stops every worker by `deadline`: idle ones get the stop frame now, busy ones when their request is
    // done; whatever still runs at the deadline is killed, with a log line each.
    awaitable<void> shutdown(clock::time_point deadline)
    {
        stop_deadline = deadline;
        stopping.raise();
        changed.notify();
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
        reaper.stop();
        if (allocator.dropped() > 0)
            log::info("pool",
                      std::to_string(allocator.dropped()) +
                          " queued request(s) were not executed: their client left while they waited");
    }

    void kill_all(const std::string &why)
    {
        stopping.raise();
        changed.notify();
        for (auto &[pid, w] : workers) {
            log::warn("pool", w->tag() + ": " + why + ", killing it");
            w->signal(SIGKILL);
        }
    }
};

Pool::Pool(asio::io_context &io, Options options) : impl_(std::make_shared<Impl>(io, std::move(options))) {}

void Pool::abandon()
{
    for (auto &[pid, w] : impl_->workers)
        w->channel->abandon();
}

Pool::~Pool()
{
    abandon();
    // Whatever is still alive dies with us (the children also have PR_SET_PDEATHSIG).
    for (auto &[pid, w] : impl_->workers)
        w->signal(SIGKILL);
}

awaitable<Result<void>> Pool::start()
{
    return impl_->start();
}

awaitable<Reply> Pool::exec(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                            StreamSink *sink)
{
    return impl_->exec(ctx, body, body_out, sink);
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

std::vector<WorkerInfo> Pool::workers() const
{
    std::vector<WorkerInfo> out;
    for (const auto &[pid, w] : impl_->workers)
        out.push_back(WorkerInfo{pid, state_name(w->state), w->jobs, w->created});
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.pid < b.pid; });
    return out;
}

unsigned Pool::serving_workers() const
{
    return impl_->serving(true);
}

std::uint64_t Pool::spawned_total() const
{
    return impl_->spawned_total;
}
std::uint64_t Pool::recycled_total() const
{
    return impl_->recycled_total;
}
std::uint64_t Pool::dropped_total() const
{
    return impl_->allocator.dropped();
}

} // namespace ferry::pool
