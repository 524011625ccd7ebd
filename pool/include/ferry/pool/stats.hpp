// What a pool counts for /metrics (server/src/control/metrics.*): why workers ended, and latency
// histograms written by one loop's thread each and summed by whoever reads them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace ferry::pool {

// Adds `n` to a counter that one thread writes and others read: a plain load and store, no locked
// read-modify-write on the request path.
inline void bump(std::atomic<std::uint64_t> &c, std::uint64_t n = 1)
{
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// Why a worker process ended (the restarts metric counts the exits by cause).
enum class Cause : unsigned {
    none,         // still alive, nothing decided
    max_jobs,     // recycled after max_jobs requests
    ttl,          // supervisor.ttl
    idle_ttl,     // supervisor.idle_ttl
    memory,       // supervisor.max_worker_memory
    exec_ttl,     // a request ran past supervisor.exec_ttl: killed
    client_gone,  // its client left and the request ran client_gone_ttl longer (not a stream): killed
    reset,        // a rolling reset replaced it (watcher, SIGHUP, resetter.Reset)
    debug,        // debug: one request per worker
    worker_stop,  // the worker asked to stop instead of answering
    error,        // it broke the protocol (output nobody asked for, a bad frame): killed
    crash,        // it exited by itself while it should have been serving
    boot_failure, // it did not pass its handshake
    shutdown,     // the server stopped
    count_,
};
const char *cause_name(Cause c);

// A latency histogram's counts (Prometheus buckets, in microseconds), as read.
struct Histogram {
    // Upper bounds of the buckets in microseconds (the last bucket is +Inf).
    static constexpr std::uint64_t bounds_us[] = {100,     250,     500,     1000,    2500,   5000,
                                                  10000,   25000,   50000,   100000,  250000, 500000,
                                                  1000000, 2500000, 5000000, 10000000};
    static constexpr std::size_t buckets = std::size(bounds_us) + 1;
    std::uint64_t count[buckets] = {}; // per bucket, not cumulative
    std::uint64_t sum_us = 0;
    std::uint64_t total() const;
    void add(const Histogram &o);
};

// A Histogram written by one thread (plain relaxed stores, no read-modify-write) and read by any.
class HistogramRecorder {
public:
    void observe(std::uint64_t us)
    {
        std::size_t i = 0;
        while (i < std::size(Histogram::bounds_us) && us > Histogram::bounds_us[i])
            ++i;
        bump(count_[i], 1);
        bump(sum_us_, us);
    }
    // Adds what was recorded to `into`.
    void read(Histogram &into) const
    {
        for (std::size_t i = 0; i < Histogram::buckets; ++i)
            into.count[i] += count_[i].load(std::memory_order_relaxed);
        into.sum_us += sum_us_.load(std::memory_order_relaxed);
    }

private:
    std::atomic<std::uint64_t> count_[Histogram::buckets] = {};
    std::atomic<std::uint64_t> sum_us_{0};
};

// Request and worker counts of a pool, summed over its loops (Pool::stats(), on loops[0]).
struct PoolStats {
    std::uint64_t requests = 0; // exec() calls
    std::uint64_t waited = 0;   // of which queued for a worker
    std::uint64_t rejected = 0; // answered 503 at once: max_queue_size
    std::uint64_t queued = 0;   // waiting for a worker now
    std::uint64_t jobs = 0;     // requests workers finished (every worker, past ones included)
    std::uint64_t spawned = 0;
    std::uint64_t exits[static_cast<unsigned>(Cause::count_)] = {};
    Histogram queue_wait; // of the requests that queued (the others waited 0)
    Histogram boot_time;  // spawn to handshake done
};

} // namespace ferry::pool
