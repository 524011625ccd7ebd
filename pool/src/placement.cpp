// Where workers run: CPU pinning (Options::cpu_affinity: workers one per CPU once booted, and with several
// loops each loop's thread beside its workers) and recycle priority (Options::recycle_priority: replacements
// booting under SCHED_IDLE). Resolved once by start(); each is dropped for good the first time the kernel
// refuses it, with a warning.
#include "group.hpp"

#include "affinity.hpp"
#include "ferry/base/log.hpp"
#include "ferry/base/loops.hpp"
#include "priority.hpp"

#include <cerrno>
#include <cstring>
#include <sched.h>

namespace ferry::pool {

namespace {
// Run on a loop: pins its thread (sched_setaffinity's 0: the calling thread) to `mask`; 0 or the errno.
awaitable<int> pin_this_thread(cpu_set_t mask)
{
    co_return ::sched_setaffinity(0, sizeof mask, &mask) == 0 ? 0 : errno;
}
} // namespace

bool Shard::idle_recycling() const
{
    return group.idle_recycling.load(std::memory_order_relaxed);
}

void Shard::pin(const WorkerPtr &w)
{
    if (!group.pinning.load(std::memory_order_relaxed) || w->is_template)
        return;
    auto &table = group.host->cpus();
    for (auto &[pid, o] : workers)
        if (o->cpu() >= 0 && o != w &&
            (o->going() || o->state() == State::stopping || o->state() == State::dead))
            table.release(pid);
    if (auto cpu = table.pin(w->pid(), cpus)) {
        w->pinned_to(*cpu);
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

void Pool::Impl::resolve_cpu_affinity()
{
    if (opt.cpu_affinity == CpuAffinity::off || opt.debug)
        return;
    const auto &cpus = host->cpus().cpus();
    const std::string key = opt.mode + ".pool.cpu_affinity: auto";
    if (cpus.size() < 2) {
        log::debug("pool", "workers are not pinned (" + key + "): only one usable CPU");
        return;
    }
    unsigned others = 0;
    const auto usable = static_cast<unsigned>(cpus.size());
    const auto fits = [this, usable](unsigned free) {
        return conf::pins_workers(opt.cpu_affinity, opt.debug, opt.num_workers, usable, free);
    };
    if (!host->cpus().reserve(opt.num_workers, others, fits)) {
        log::debug("pool",
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

awaitable<void> Pool::Impl::pin_loops()
{
    if (!opt.pins_loops || !pinning.load(std::memory_order_relaxed) || shards.size() < 2 ||
        shards[0]->cpus.empty())
        co_return;
    for (auto &s : shards)
        if (s->opt.num_workers == 0) // fewer workers than loops: a loop without one serves on others'
            co_return;
    host->cpus().loops_pinned(); // processes started from now on get every CPU back (launch.cpp)
    const auto errors = co_await on_each<int>(
        loops(), [this](std::size_t i) { return pin_this_thread(detail::cpu_mask(shards[i]->cpus)); });
    std::string all;
    bool refused = false;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const auto &set = shards[i]->cpus;
        all +=
            (all.empty() ? "loop " : "; loop ") + std::to_string(i) +
            (errors[i] != 0 ? std::string(" not pinned (") + std::strerror(errors[i]) + ")"
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

Result<void> Pool::Impl::resolve_recycle_priority()
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

} // namespace ferry::pool
