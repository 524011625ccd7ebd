// RoadRunner's metrics plugin (metrics.address; internal to server/): GET /metrics in Prometheus text format
// (version 0.0.4): HTTP requests by status class, their duration and response bytes; per pool the queue
// (depth now, wait histogram), workers by state, each worker's RSS and jobs, jobs done, worker exits by
// cause, boot time; with websockets, the server-wide budgets (bytes held, refusals, message timeouts).
// Counters are per loop, written by their loop's thread only (no read-modify-write) and summed at the
// scrape (the WebSocket budgets are shared atomics); the worker list is read on each loop (Pool::snapshot()).
#pragma once

#include "control/conn_slots.hpp"
#include "control/counters.hpp"
#include "control/probe_server.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"
#include "ferry/pool/stats.hpp"
#include "pools.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry::server::detail {

namespace ws {
struct WsBudgets;
}

// One loop's HTTP requests (SharedState::http_stats).
class HttpStats {
public:
    // A request answered `status` (0: the client left before any answer, counted as 499 as nginx does)
    // after `us` microseconds, `bytes` written.
    void record(int status, std::uint64_t us, std::uint64_t bytes)
    {
        pool::bump(by_class_[status_class(status)], 1);
        pool::bump(bytes_, bytes);
        duration_.observe(us);
    }
    // A request refused by the parser (no handler ran): counted by class, not timed.
    void record_refused(int status) { pool::bump(by_class_[status_class(status)], 1); }

    struct Totals {
        std::uint64_t by_class[6] = {}; // [1] = 1xx ... [5] = 5xx; [0] other
        std::uint64_t bytes = 0;
        pool::Histogram duration;
    };
    void read(Totals &into) const;

private:
    static unsigned status_class(int status)
    {
        if (status == 0)
            status = 499;
        return status >= 100 && status <= 599 ? static_cast<unsigned>(status / 100) : 0u;
    }
    std::atomic<std::uint64_t> by_class_[6] = {};
    std::atomic<std::uint64_t> bytes_{0};
    pool::HistogramRecorder duration_;
};

// What one pool shows.
struct PoolReport {
    std::string name; // "http", "websockets"
    pool::PoolStats stats;
    std::vector<pool::WorkerInfo> workers;
};

// The WebSocket connections' server-wide budgets (ws/budget.hpp), read at the scrape.
struct WsBudgetReport {
    std::uint64_t assembly_bytes = 0, assembly_limit = 0;     // limit 0: none
    std::uint64_t send_queue_bytes = 0, send_queue_limit = 0; // limit 0: none
    std::uint64_t assembly_refusals = 0, send_queue_refusals = 0, message_timeouts = 0;
};
WsBudgetReport read_ws_budgets(const ws::WsBudgets &b);

// The exposition text (a pure function: unit-tested against the format).
// `control`: the control listeners' closed connections (control/conn_slots.hpp); `ws`: null without
// websockets.
std::string format_metrics(const HttpStats::Totals &http, const std::vector<PoolReport> &pools,
                           double uptime_seconds, const ControlClosed &control = {},
                           const WsBudgetReport *ws = nullptr);

// The process's descriptors: open now, the limit, and the refusals for want of one (descriptors.hpp).
void format_descriptor_metrics(std::string &out, const DescriptorRefusals &refusals);

struct SharedState;

class MetricsServer {
public:
    // `counters`: the server-wide counters it shows, and where its listener's closes are counted.
    // `shared`: the listener it shares with the status endpoints (metrics.address = status.address); null:
    // its own.
    MetricsServer(SharedState &loop, const conf::MetricsConfig &cfg, ServerCounters &counters,
                  std::shared_ptr<ProbeServer> shared = nullptr);
    ~MetricsServer();
    MetricsServer(const MetricsServer &) = delete;
    MetricsServer &operator=(const MetricsServer &) = delete;

    // Binds metrics.address; the error names the key.
    Result<void> bind();
    // Answers until stop(), on loops[0], with a series per pool of `pools`. `ws_budgets` may be null.
    void run(std::vector<const HttpStats *> loops, const Pools &pools,
             const ws::WsBudgets *ws_budgets = nullptr);
    void stop();
    ProbeServer &listener(); // its listener (shared with status, and RPC, when they are on its address)
    std::string address() const;

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::server::detail
