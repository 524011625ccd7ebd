// Supervising workers (internal to pool/): max_jobs recycling (with per-worker jitter), and one coarse ticker
// over busy workers for exec_ttl (the request's exchange is failed: 504, then the pool kills the worker) and
// the exec_warn slow-request warning. Nothing per request but reading the last tick's time. ttl, idle_ttl,
// memory limits and the rolling reset belong here too.
#pragma once

#include "event.hpp"
#include "ferry/pool/pool.hpp"
#include "worker.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>

namespace ferry::pool {

class Supervisor {
public:
    using clock = std::chrono::steady_clock;

    // Watches the busy workers of `workers` until `stopping` is raised.
    Supervisor(const Options &opt, const Registry &workers, const Flag &stopping);

    // A new worker's max_jobs: Options::max_jobs plus up to 25 %, so that workers started together do not all
    // recycle together; 0 = unlimited.
    std::uint64_t jittered_max_jobs();

    // What to do with a worker after a request, once counted.
    enum class AfterJob {
        keep,   // serve on
        retire, // it reached max_jobs: start its replacement; it serves on until the replacement is ready
        stop,   // a retiring worker reached twice its limit: stop it now (requests wait for the replacement)
    };
    // `paused`: new workers fail to boot, so none is retired (the old ones are the only good ones).
    AfterJob job_done(Worker &w, bool paused);

    // The time of the last tick: a request's start time without a clock read per request.
    clock::time_point now() const { return coarse_now_; }

    // The ticker. `self` keeps its owner alive (an aliasing pointer into it).
    static awaitable<void> run(std::shared_ptr<Supervisor> self);

private:
    void tick(std::chrono::milliseconds period);

    const Options &opt_;
    const Registry &workers_;
    const Flag &stopping_;
    clock::time_point coarse_now_ = clock::now();
    std::mt19937 rng_;
};

} // namespace ferry::pool
