// Supervising workers (internal to pool/): max_jobs recycling, the soft limits (ttl, idle_ttl,
// max_worker_memory) and exec_ttl, on one coarse ticker per loop; debug's one request per worker.
//
// Soft limits: a worker past one is marked (Recycle::marked, with its cause) and its replacement boots while
// it serves on; when the replacement is ready the pool retires it, at once when idle, after its request when
// busy (Shard::retire_one). Thresholds are jittered per worker (max_jobs up to 25 % more; ttl and memory up
// to 10 % less, never past what is configured; spread evenly over that range, see ready()) and at most
// max_recycling workers of a loop are marked at once, so a pool that started together does not restart
// together. Memory is read from /proc every watch_tick, and after requests as often as the worker's growth
// calls for: a worker leaking 5 MB per request is read every request near its limit, one that does not grow
// only on the tick. Nothing per request but a counter compare and reading the last tick's time.
//
// max_jobs without a gap: a worker's replacement starts before its limit, when the requests it serves during
// twice the measured boot time would take it there (its rate is read from the clock a few times per life:
// at a quarter of max_jobs, then halfway to the start point each time). A replacement ready before the limit
// leaves the old worker serving only requests that wait for a worker, up to max_jobs (Recycle::replaced); one
// ready late still finds it serving, up to twice max_jobs.
#pragma once

#include "condition.hpp"
#include "ferry/pool/pool.hpp"
#include "worker.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace ferry::pool {

class Supervisor {
public:
    using clock = std::chrono::steady_clock;

    // Watches the workers of `workers` until `stopping` is raised; marks none while `paused` (new workers
    // fail to boot: the old ones are the only good ones).
    Supervisor(const Options &opt, const Registry &workers, const Flag &stopping, const bool &paused);

    // Called when the ticker marked workers for replacement: start their replacements.
    std::function<void()> on_marked;

    // A worker passed its handshake: its jittered limits start now.
    void ready(Worker &w);

    // A worker of this loop booted in `took` (spawn to handshake): how long a replacement takes to be ready,
    // for starting max_jobs replacements early. The estimate follows a slower boot at once and a faster one
    // by an eighth per boot.
    void booted(std::chrono::nanoseconds took);
    std::chrono::nanoseconds boot_estimate() const { return boot_estimate_; }

    // What to do with a worker after a request, once counted.
    enum class AfterJob {
        keep,   // serve on
        retire, // it reached a limit: start its replacement; it serves on until the replacement is ready
        stop,   // stop it now (debug; a retiring worker far past its limit): requests wait for another
    };
    AfterJob job_done(Worker &w);

    // Reads the worker's RSS and plans the next reading after requests; true when over its limit (the tick
    // and job_done() call it).
    bool over_memory(Worker &w);

    // The time of the last tick: a request's start time without a clock read per request.
    clock::time_point now() const { return coarse_now_; }

    // The ticker. `self` keeps its owner alive (an aliasing pointer into it).
    static awaitable<void> run(std::shared_ptr<Supervisor> self);

private:
    void tick(std::chrono::milliseconds period);
    void watch(clock::time_point now); // ttl, idle_ttl, memory of every serving worker
    // Workers marked for replacement that still serve.
    unsigned recycling() const;
    void mark(Worker &w, Cause c, const std::string &why);
    // At its rate_check_jobs (Worker::Limits): true when the jobs the worker does during two boots (at its
    // rate since the last check) reach its max_jobs, so its replacement must start now to be ready at the
    // limit; else plans the next check, halfway to that point.
    bool starts_early(Worker &w);

    const Options &opt_;
    const Registry &workers_;
    const Flag &stopping_;
    const bool &paused_;
    clock::time_point coarse_now_ = clock::now();
    clock::time_point next_watch_ = clock::now();
    double spread_ = 0; // where the jitter sequence is, in [0, 1)
    std::chrono::nanoseconds boot_estimate_{0};
};

} // namespace ferry::pool
