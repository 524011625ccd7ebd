// The control plane of a running server (docs/architecture.md, "Control"): rolling resets asked by the file
// watcher (reload:), by SIGHUP and by the RPC listener (rpc.listen), and ferry.Stop. Everything runs on
// loops[0], where the pool's reset runs.
#pragma once

#include "pools.hpp"
#include <functional>
#include <optional>
#include <string_view>

#include "control/conn_slots.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"

#include <functional>
#include <memory>
#include <string>

namespace ferry::server::detail {

class ProbeServer;

class Control {
public:
    // `stop()` asks for a graceful stop (as SIGTERM does).
    // `counters`: where the RPC listener's closes are counted (outlives it).
    Control(asio::io_context &io, const conf::Config &cfg, ControlCounters &counters,
            std::function<void()> stop);
    ~Control();
    Control(const Control &) = delete;
    Control &operator=(const Control &) = delete;

    // More RPC methods (websockets.*), set before bind().
    void set_rpc_extension(
        std::function<std::optional<Result<std::string>>(std::string_view method, std::string_view arg)> f);
    // Called at every rolling reset of the HTTP workers (SIGHUP, `ferry reset`, the watcher) with its cause,
    // before the workers are reset: the TLS certificates are read again. Set before start().
    void on_reset(std::function<void(std::string_view why)> f);
    // Binds rpc.listen, if configured, so that the workers can be given its address (RR_RPC) before they
    // start. The error names the key.
    Result<void> bind();
    // rpc.listen as bound ("tcp://127.0.0.1:6001"), "" without a listener.
    std::string rpc_address() const;
    // rpc.listen is on the admin listener `l` (rpc_rides): `l` hands RPC its connections. Before start().
    void ride(ProbeServer &l);
    // Once the workers are ready: the watcher, SIGHUP and the RPC listener start acting on `pool`.
    Result<void> start(const Pools &pools);
    // At a stop: no more resets are started.
    void stop();
    // After stop(): until the RPC connections' sessions have ended, or `deadline` (true: they have).
    awaitable<bool> join(std::chrono::steady_clock::time_point deadline);

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::server::detail
