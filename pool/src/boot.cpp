// A new worker: started from its command or forked from the template, its pipes, its boot (the PID handshake,
// idle priority while it replaces one that still serves) and what follows a boot: ready, pinned, counted;
// or a boot failure, reported once per back-off step while the workers with the old code keep serving.
#include "group.hpp"

#include "ferry/base/log.hpp"
#include "priority.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::pool {

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
    w.channel().stdin_pipe().assign(in[1], ec);
    w.channel().stdout_pipe().assign(out[0], ec);
    w.err().assign(err[0], ec);
    ends = {in[0], out[1], err[1]};
    return {};
}
} // namespace

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
    w->launched(*pid, index);
    if (idle)
        w->boots_idle();
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
        log::warn("pool",
                  opt.mode + ".pool.fork: " + piped.error().message + "; starting the worker on its own");
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
    w->launched(*pid, index);
    // Its boot (the estimate that starts max_jobs replacements early, the boot-time histogram) is the fork
    // and its handshake: not the template's own start, which the first forks wait for (~40 ms of PHP boot
    // against ~2 ms for a fork), nor another fork's turn.
    w->forked_at(forked.sent);
    if (auto status =
            group.claim(w->pid(), index)) // it ended before we knew it: its exit, once it is registered
        asio::post(io, [self = shared_from_this(), p = w->pid(), st = *status] { self->on_exit(p, st); });
    co_return w;
}

void Shard::restore_priority(const WorkerPtr &w, const std::string &why)
{
    w->priority_restored();
    if (!detail::set_normal(w->pid()))
        idle_recycling_failed(w);
    else if (!why.empty())
        log::debug("pool", w->tag() + " still booting at idle priority: raised to normal (" + why + ")");
}

void Shard::raise_idle_boots(const std::string &why)
{
    for (auto &[pid, b] : workers)
        if (b->idle_boot() && b->state() == State::spawning)
            restore_priority(b, why);
}

awaitable<void> Shard::limit_idle_boot(std::shared_ptr<Shard> self, std::weak_ptr<Worker> weak)
{
    co_await self->stopping.wait_until(clock::now() + self->opt.idle_boot_limit);
    WorkerPtr w = weak.lock();
    if (w && w->idle_boot() && w->state() == State::spawning && !self->stopping.raised())
        self->restore_priority(w, std::to_string(self->opt.idle_boot_limit.count()) + " ms since its spawn");
}

void Shard::stop_booting(const WorkerPtr &w)
{
    w->signal(SIGTERM);
    asio::co_spawn(io, kill_boot_after_stop(w), asio::detached);
}

awaitable<void> Shard::kill_boot_after_stop(WorkerPtr w)
{
    const bool exited = co_await wait_exit(w, std::chrono::milliseconds(1000));
    if (!exited && w->state() == State::spawning) {
        log::info("pool", w->tag() + " still booting 1 s after the stop's SIGTERM: killing it");
        w->signal(SIGKILL);
    }
}

awaitable<void> Shard::spawn_worker(std::shared_ptr<Shard> self, bool idle)
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
    if (!w->is_template)
        w->spawned_in(spawn_gen);
    self->spawned_total.fetch_add(1, std::memory_order_relaxed);
    self->workers.emplace(w->pid(), w);
    w->channel().on_unexpected = [weak_self = std::weak_ptr<Shard>(self),
                                  weak_w = std::weak_ptr<Worker>(w)](const std::string &what) {
        auto s = weak_self.lock();
        auto wp = weak_w.lock();
        if (s && wp)
            s->unexpected_output(wp, what);
    };
    w->channel().watch();
    asio::co_spawn(self->io,
                   forward_stderr(w,
                                  [weak = std::weak_ptr<Shard>(self)](std::string_view line) {
                                      auto s = weak.lock();
                                      return s && s->spawner.boot_line_repeated(line);
                                  }),
                   log_exceptions{"worker stderr"});
    log::debug("pool", w->tag() + (w->idle_boot() ? " spawned (booting at idle priority)" : " spawned"));
    if (w->idle_boot())
        asio::co_spawn(self->io, limit_idle_boot(self, w), asio::detached);
    // Launched while the stop went by: it missed the stop's SIGTERM to booting workers.
    if (self->stopping.raised())
        self->stop_booting(w);

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
        if (w->state() != State::dead)
            w->to(State::stopping);
        w->blame(Cause::boot_failure);
        co_await wait_exit(w, std::chrono::milliseconds(200));
        self->kill_broken(w, Cause::boot_failure);
        co_await wait_exit(w, std::chrono::milliseconds(500));
        self->boot_failed(Spawner::boot_failure(*w, booted.error().message, self->spawner.command_line()));
        co_return;
    }
    // Only a worker with the current code shows that new workers boot: one started before a reset (a
    // max_jobs replacement that loaded the old code) arriving after the reset's boots failed must not
    // resume recycling (the old workers would stop while their replacements cannot boot) nor clear the
    // back-off.
    const bool current = w->generation() >= self->generation;
    if (current) {
        self->spawner.booted();
        self->boot_broken = false;
    }
    if (w->idle_boot())
        self->restore_priority(w);
    self->pin(w);
    self->supervisor.ready(*w);
    const auto took = clock::now() - w->started();
    self->supervisor.booted(took);
    self->boot_time.observe(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
    if (!current) { // a reset began while it booted: it may have loaded the old code
        // its exit is the reset's (it was counted as worker_stop)
        w->mark(w->cause() == Cause::none ? Cause::reset : w->cause());
    }
    log::info("pool", w->tag() + " ready (" + (w->codec() == relay::Codec::msgpack ? "msgpack" : "json") +
                          " context)");
    w->to(State::ready); // counted as serving before retire_one() asks maintain() for more
    if (!w->going())
        self->retire_one(); // a fresh worker replaces one that waits for it (never itself)
    self->make_available(w);
    self->shed_surplus();
    // Its boot slot is free: a reset that began while it booted starts its next new worker now (it would
    // otherwise wait for the next request to call maintain()).
    self->maintain();
    self->changed_now();
}

void Shard::boot_failed(const std::string &msg)
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

bool Shard::hold_replacements()
{
    unsigned kept = 0;
    for (auto &[pid, w] : workers)
        if (w->recycle() == Recycle::marked && (w->state() == State::ready || w->state() == State::working)) {
            w->recycle_to(Recycle::serving);
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

bool Shard::first_boot_failure()
{
    return group.first_failure_of(generation);
}

} // namespace ferry::pool
