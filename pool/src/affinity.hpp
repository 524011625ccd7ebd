// CPU affinity of workers (Options::cpu_affinity): each worker pinned to one of the CPUs the server may run
// on, spread evenly (the CPU with the fewest pinned workers that still count, the lowest first). A worker
// being replaced stops counting as soon as it is marked, so its replacement gets the CPU it leaves. One
// table for the whole process (the Host's: every loop's shard, the HTTP and the websockets pools), guarded by
// a mutex:
// it is touched when a worker is ready, marked for replacement or gone, never per request. Pools pin only
// while all of them together have no more workers than CPUs (reserve()): the first pools started get it.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <sched.h>
#include <string>
#include <unordered_map>
#include <vector>

namespace ferry::pool::detail {

class CpuPins {
public:
    // Pins `pid` to `cpu`; false with errno set on failure.
    using Apply = std::function<bool(int pid, int cpu)>;

    // `cpus`: where workers may go, ascending; `apply` defaults to sched_setaffinity(2).
    explicit CpuPins(std::vector<int> cpus, Apply apply = {});

    const std::vector<int> &cpus() const { return cpus_; }
    // Pins `pid` to the CPU with the fewest counted workers (ties: the lowest) and counts it there: that CPU,
    // or nullopt with errno set when the kernel refused. `within` (a subset of cpus(), as loop_cpus() gives:
    // the CPUs of the worker's loop) breaks ties: among the least loaded CPUs, one of those if there is one.
    // The even spread comes first: a loop with more workers than CPUs of its own, or a second pool, spreads
    // onto the others.
    std::optional<int> pin(int pid, const std::vector<int> &within = {});

    // The CPUs of event loop `loop` of `loops`: every loops-th CPU of `cpus` from position `loop` (with 8
    // loops on 16 CPUs, loop 0 gets CPUs 0 and 8, which Linux usually numbers as the two hardware threads of
    // one core). Empty when there is nothing to split: one loop, or more loops than CPUs.
    static std::vector<int> loop_cpus(const std::vector<int> &cpus, unsigned loop, unsigned loops);
    // `pid` no longer counts (marked for replacement, stopping or gone); unknown pids are ignored.
    void release(int pid);
    // Workers counted on `cpu` (for tests and logs).
    unsigned counted(int cpu) const;

    // A pool that pins its `n` workers reserves them first: true when `fits(free)` says they fit in the CPUs
    // the other pools left free (default: n <= free; the pool passes conf::pins_workers), else nothing is
    // reserved and that pool does not pin. `others` gets what the other pools had reserved. unreserve()
    // gives them back (the pool is gone).
    bool reserve(unsigned n, unsigned &others, const std::function<bool(unsigned free)> &fits = {});
    void unreserve(unsigned n);

    // Every CPU of the table, once loops_pinned() was called (an event loop's thread was pinned to its
    // CPUs): what launch() gives a new process instead of the launching loop's CPUs. nullptr before.
    const cpu_set_t *spawn_affinity() const
    {
        return loops_pinned_.load(std::memory_order_acquire) ? &all_ : nullptr;
    }
    void loops_pinned() { loops_pinned_.store(true, std::memory_order_release); }

private:
    mutable std::mutex mu_;
    std::vector<int> cpus_;
    Apply apply_;
    std::unordered_map<int, int> counted_; // pid → its CPU
    unsigned reserved_ = 0;                // workers of the pools that pin
    cpu_set_t all_;                        // cpus_ as a mask
    std::atomic<bool> loops_pinned_{false};
};

// A CPU list as sched_setaffinity(2) takes it, and as the log shows it ("0,2").
cpu_set_t cpu_mask(const std::vector<int> &cpus);
std::string cpu_list(const std::vector<int> &cpus);

} // namespace ferry::pool::detail
