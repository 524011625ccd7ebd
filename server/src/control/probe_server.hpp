// The admin listener (internal to server/): the status endpoints and /metrics, each on its own address or
// both on one (status.address = metrics.address: one listener, one router by path), and RPC too when
// rpc.listen is on that address (its connections handed over by their first byte). Its connections run the
// HTTP session every listener runs (http/session.cpp, through the client Stream: the one place TLS comes
// in) with their own Site: the routes as the one handler, an 8 KiB head and no body, first_byte_timeout
// for the first byte and 5 s for the request from there, one request per connection, not observed, and
// answering on through a drain until the listener's own stop. At most 64 connections at once, the oldest
// idle one closed to make room for a new one (control/conn_slots.hpp). Runs on loops[0].
#pragma once

#include "control/conn_slots.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/base/task_group.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/server/http_parser.hpp"
#include "transport/stream.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ferry::server::detail {

struct SharedState;

class ProbeServer {
public:
    // Appends the whole response to `out`.
    using Answer = std::function<awaitable<void>(std::string &out, const Request &req)>;

    // On `loop` (loops[0]'s state: its sessions are that loop's connections, closed by a stop with the
    // others). `key` names the address in errors ("status.address"); `component` is the log's; closes are
    // counted in `counters` (outlives it).
    ProbeServer(SharedState &loop, conf::Address address, std::string key, std::string component,
                ControlListener which, std::chrono::milliseconds first_byte_timeout,
                ControlCounters &counters);
    ~ProbeServer();
    ProbeServer(const ProbeServer &) = delete;
    ProbeServer &operator=(const ProbeServer &) = delete;

    // Binds the address (nothing is answered before run()); the error names the key. Bound already: nothing.
    Result<void> bind();
    // Answers requests for `paths` (exact, before any '?') with `answer`; before run() or on the same turn of
    // the loop. A path no route has gets 404 naming the paths there are; with one route, its answer decides.
    void route(std::vector<std::string> paths, Answer answer);
    // Connections whose first byte `theirs` claims go to `take` before anything is read from them (another
    // protocol on the same port: RPC's Goridge frames on the admin listener); the first-byte timeout applies
    // until that byte. Before run().
    using Claim = std::function<bool(unsigned char first)>;
    using Take = std::function<void(StreamSocket sock, std::string peer)>;
    void hand_over(Claim theirs, Take take);
    // Starts accepting (once; later calls do nothing).
    void run();
    void stop();
    // After stop(): until its connections' sessions have ended, or `deadline` (true: they have).
    awaitable<bool> join(std::chrono::steady_clock::time_point deadline);
    std::string address() const; // host:port as bound

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

// The one listener status and metrics share when status.address = metrics.address (port 0 is "any free port"
// for each, not one address); null otherwise. Their first_byte_timeouts differing, the longer applies and a
// warning names both keys.
std::shared_ptr<ProbeServer> shared_probe_listener(SharedState &loop, const conf::Config &cfg,
                                                   ControlCounters &counters);

// The admin listener RPC rides: "status.address" or "metrics.address" when rpc.listen is tcp:// on that
// address as written there (a port, not 0), and that listener is enabled; "" otherwise (RPC's own
// listener). That listener hands RPC the connections whose first byte opens a Goridge frame (version 1, a
// header of 3 to 5 words: 0x13..0x15; an RPC call has 0x15), never an HTTP request's (a method's capital
// letter) nor a TLS ClientHello's (0x16).
std::string rpc_rides(const conf::Config &cfg);
inline bool opens_rpc_frame(unsigned char first)
{
    return first >= 0x13 && first <= 0x15;
}

} // namespace ferry::server::detail
