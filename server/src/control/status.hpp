// RoadRunner's status plugin (status.address; internal to server/): GET /health answers 200 when a pool has
// live workers, GET /ready when one can take a request now (never during a stop); otherwise
// status.unavailable_status_code. `?plugin=http` (repeatable, or comma-separated) picks the pools; without
// it every pool counts. One request per connection, parsed by the server's own HTTP parser.
#pragma once

#include "control/conn_slots.hpp"
#include "control/probe_server.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"
#include "pools.hpp"

#include <memory>
#include <string>

namespace ferry::server::detail {

struct SharedState;

namespace broker {
class Counters;
}

class StatusServer {
public:
    // `counters`: where its listener's closes are counted (outlives it).
    // `shared`: the listener it shares with /metrics (status.address = metrics.address); null: its own.
    StatusServer(SharedState &loop, const conf::StatusConfig &cfg, ControlCounters &counters,
                 std::shared_ptr<ProbeServer> shared = nullptr);
    ~StatusServer();
    StatusServer(const StatusServer &) = delete;
    StatusServer &operator=(const StatusServer &) = delete;

    // Binds status.address (nothing is answered before run()); the error names the key.
    Result<void> bind();
    // Answers until stop(), for each of `pools`; `stopping` is read when /ready is asked.
    void run(const Pools &pools, const bool *stopping);
    // websockets.broker: /ready says how it stands; `?plugin=broker` answers 503 while it is down (by
    // default a broker down does not make the node unready: its local delivery still works).
    void report_broker(const broker::Counters *b);
    void stop();
    ProbeServer &listener();     // its listener (shared with metrics, and RPC, when they are on its address)
    std::string address() const; // host:port as bound

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::server::detail
