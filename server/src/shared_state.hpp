// What one event loop's sessions and handlers share (internal to server/); touched by its loop's thread only.
#pragma once

#include "control/conn_slots.hpp"
#include "control/counters.hpp"
#include "control/metrics.hpp"
#include "ferry/base/budget.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/task_group.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/server/http_parser.hpp"
#include "transport/transport.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace ferry::server::detail {

class Router;
class TlsContext;

// The listener a session serves for; the loop's SharedState keeps its connections, budgets and counters
// either way. The HTTP listener's: http.* limits and timeouts, the loop's handlers, observed, drained at a
// stop. An admin listener's (control/probe_server.hpp): its routes, its own limits and first-byte timeout,
// not observed, answering on through the drain until its own stop.
struct Site {
    const Router *router = nullptr;
    const Limits *limits = nullptr;
    std::chrono::milliseconds first_byte{};  // a new connection's first byte
    std::chrono::milliseconds idle{};        // between requests
    std::chrono::milliseconds read_header{}; // a request's head, from its first byte
    bool observed = true;      // /metrics' counts and the access log (with SharedState::observe)
    bool drains = true;        // a stop ends its idle connections and takes no new request
    TlsContext *tls = nullptr; // set: TLS (a handshake before the first request)
};

struct SharedState {
    SharedState(asio::io_context &io_, const conf::Config &c, Budget &b, const Router &r, ServerCounters &n)
        : io(io_), config(c), budget(b), router(r),
          counters(n), http_site{&router, &limits, c.http.idle_timeout, c.http.idle_timeout,
                                 c.http.read_header_timeout}
    {
    }

    asio::io_context &io;
    unsigned loop = 0; // this loop's index (the pool's shard)
    const conf::Config &config;
    Budget &budget;                // request and response bodies in memory, all connections together
    Budget *head_budget = nullptr; // receive buffers past 8 KiB, all connections (nullptr: no limit)
    const Router &router;          // which handler serves a request
    ServerCounters &counters;      // server-wide: limits' refusals, descriptor refusals (/metrics)
    std::string temp_dir;          // where request bodies too large for memory go
    std::string upload_prefix = "ferry-upload-"; // upload file names there (UploadsDir::prefix)
    Limits limits;
    Site http_site;           // the HTTP listener's sessions: the router, `limits` and http.* timeouts above
    Site https_site;          // http.ssl.address's: the same with TLS (server.cpp sets it up)
    std::string default_host; // for HTTP/1.0 requests without Host
    Connections connections;
    bool draining = false; // stopping: finish what is in flight, take no new request
    // Each request's status, duration and bytes are taken when someone reads them: /metrics (http_stats) or
    // http.access_logs (a line each).
    bool observe = false;
    HttpStats http_stats;
    // Open sessions: HTTP connections, and WebSocket connections after their handshake, each holding the
    // group while it runs. A stop closes their connections and joins them (server.cpp: drain_loop,
    // close_loop).
    TaskGroup sessions;
    // Reads consumed before anything else runs (HTTP/2's: nghttp2 takes the bytes at once) go here, one
    // buffer for the loop instead of one per idle connection: the reader waits for readability first, then
    // reads.
    std::string scratch = std::string(16 * 1024, '\0');
};

// A request done (SharedState::observe): /metrics' counts, the access log's line (http/session.cpp).
void observed(SharedState &st, const Wire &wire, const Request &req, int status, int worker_pid,
              steady::time_point started, std::uint64_t bytes);

// Serves one client connection until it closes: for the HTTP listener, or for `site` (`lease`: the admin
// connection's slot, told when it speaks, is busy and times out before its first byte).
awaitable<void> http_session(SharedState &state, StreamSocket socket);
awaitable<void> http_session(SharedState &state, StreamSocket socket, const Site &site,
                             ConnSlots::Lease *lease);

} // namespace ferry::server::detail
