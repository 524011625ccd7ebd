// What a pool's shards share (internal to pool/): the options, the worker total, the reaper and the fork
// template on loops[0], the host's process table through which exits come back, and what start() resolved
// (CPU pinning, recycle priority). The facade (ferry/pool/pool.hpp) calls into it. Its parts:
//   pool.cpp       construction, start, shutdown and its summary, snapshot, the facade and stats
//   exits.cpp      the pool's side of the process table: launching on loops[0], exits routed to shards
//   placement.cpp  CPU pinning of workers and loops, recycle priority
//   reset.cpp      rolling reset over every loop
#pragma once

#include "ferry/pool/host.hpp"
#include "ferry/pool/pool.hpp"

#include "fork_template.hpp"
#include "process_table.hpp"
#include "reaper.hpp"
#include "shard.hpp"
#include "spawner.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <sched.h>
#include <string>
#include <vector>

namespace ferry::pool {

struct Pool::Impl final : detail::ExitListener {
    Impl(std::shared_ptr<Host> host, const std::vector<asio::io_context *> &loops, Options o);
    ~Impl();

    Options opt;
    std::shared_ptr<Host> host; // the process's, shared with its other pools
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
    // The process table's `part` for the fork template's processes (else: the shard's index).
    static constexpr unsigned template_owner = ~0u;

    std::vector<asio::any_io_executor> loops() const;

    // ---- exits.cpp --------------------------------------------------------------------------------

    // Starts a worker's process for shard `owner` (on loops[0]: see exits.cpp) and records it.
    Result<int> launch_on_first(const Spawner &spawner, ForkTemplate::ChildEnds ends, unsigned owner);
    // Records that `pid` (a forked worker) is shard `owner`'s; its wait status when it was reaped already.
    std::optional<int> claim(int pid, unsigned owner);
    // detail::ExitListener: the reaper (on loops[0]) reaped one of this pool's processes.
    void exited(int pid, int status, unsigned owner) override;
    // Every process of this pool is killed now, with a log line each; the shards stop.
    void kill_all(const std::string &why);

    // ---- placement.cpp ----------------------------------------------------------------------------

    void resolve_cpu_affinity();
    // With workers pinned and several loops, each loop's thread goes to the CPUs of its own workers
    // (Shard::cpus), so that a request's hops between the loop and its worker stay on one CPU (or one core's
    // hardware threads): on the 2-vCPU benchmark VM a wake-up across vCPUs is dear, and two loops left to the
    // scheduler read anywhere from 38k to 70k req/s by where they settled, 61k to 98k pinned (bench/results/
    // 2026-12-05-loops-beside-workers.md). The HTTP pool's choice; the websockets pool's workers use the
    // same split.
    awaitable<void> pin_loops();
    Result<void> resolve_recycle_priority();

    // ---- pool.cpp, reset.cpp ----------------------------------------------------------------------

    awaitable<Result<void>> start();
    awaitable<void> shutdown(clock::time_point deadline);
    awaitable<Result<ResetReport>> reset(std::string why);
    awaitable<std::vector<WorkerInfo>> snapshot(bool memory);
};

} // namespace ferry::pool
