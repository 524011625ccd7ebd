// The RPC listener (docs/protocol.md §6; rpc.listen): RoadRunner's methods resetter.List, resetter.Reset,
// informer.List and informer.Workers with RoadRunner's field names, plus ferry.Stop, JSON-encoded, over
// tcp://host:port or unix://path, or on the admin listener of status.address / metrics.address when
// rpc.listen names it (probe_server.hpp, rpc_rides: that listener hands over the connections that open
// with an RPC frame). One coroutine per connection, calls answered in order; a frame that is not
// an RPC frame is logged and its connection closed, one over the size limit (rpc_payload_limit) is answered
// with an error naming both sizes and skipped. At most 64 connections (control/conn_slots.hpp: a silent one
// is closed after rpc.first_byte_timeout, the oldest idle one makes room for a new caller). Whoever reaches
// the listener controls the workers: a unix socket is made mode 0600, and a TCP address other than loopback
// needs rpc.allow_remote (and is warned about).
#pragma once

#include "control/conn_slots.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/base/task_group.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"
#include "pools.hpp"
#include "transport/stream.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::server::detail {

// What the methods act on.
struct RpcTarget {
    const Pools *pools = nullptr; // by plugin name (null: not started yet)
    std::string command;          // the workers' command line, for informer.Workers
    std::function<void()> stop;   // ferry.Stop: a graceful stop, as SIGTERM
    // resetter.Reset of the pool named `plugin` ("http" or "websockets")
    std::function<awaitable<Result<pool::ResetReport>>(std::string why, std::string plugin)> reset;
    // More methods (websockets.*): nullopt when the method is not one of them.
    std::function<std::optional<Result<std::string>>(std::string_view method, std::string_view arg)>
        extension;
};

// The largest call payload taken: 1 MiB, or with websockets twice websockets.max_message_size and 64 KiB
// (a publish carries its message as JSON text or base64).
std::size_t rpc_payload_limit(const conf::Config &cfg);

// One call: the result as JSON, or the error message. Exposed for tests.
awaitable<Result<std::string>> rpc_call(RpcTarget &target, std::string_view method, std::string_view arg);

class RpcServer {
public:
    // `counters`: where its listener's closes are counted (outlives it).
    RpcServer(asio::io_context &io, const conf::RpcConfig &config, RpcTarget target,
              ControlCounters &counters, std::size_t max_payload = 1 << 20);
    ~RpcServer();
    RpcServer(const RpcServer &) = delete;
    RpcServer &operator=(const RpcServer &) = delete;

    // Before bind(): it rides the admin listener `key` names ("status.address", "metrics.address"), which
    // hands it the connections that open with an RPC frame (adopt); bind() then only checks rpc.listen.
    void ride(std::string key);
    // Binds and listens (nothing is accepted before run()); the error names rpc.listen.
    Result<void> bind();
    // The pools informer.Workers reads and resetter.Reset names (set before run()).
    void set_pools(const Pools *pools);
    // Accepts until stop().
    void run();
    // A connection the admin listener it rides accepted, whose first byte is an RPC frame's (not read yet).
    // Before run() or after stop(): closed.
    void adopt(StreamSocket sock, std::string peer);
    void stop();
    // After stop(): until its connections' sessions have ended, or `deadline` (true: they have).
    awaitable<bool> join(std::chrono::steady_clock::time_point deadline);
    // The bound address in rpc.listen's form ("tcp://127.0.0.1:6001": a port 0 resolved).
    const std::string &address() const;

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::server::detail
