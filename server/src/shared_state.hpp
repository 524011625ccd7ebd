// State shared by the listener and every HTTP session (internal to server/).
#pragma once

#include "ferry/conf/config.hpp"
#include "ferry/pool/asio.hpp"
#include "ferry/pool/pool.hpp"
#include "ferry/server/http_parser.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <list>

namespace ferry::server::detail {

using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

// One per connection, registered while its session runs. The ticker enforces `deadline`
// (one coarse timer for all connections instead of a timer per read).
struct Conn {
    tcp::socket *socket = nullptr;
    steady::time_point deadline = steady::time_point::max();
    bool idle = true; // waiting for the first byte of a request
    bool timed_out = false;
};

struct SharedState {
    SharedState(asio::io_context &io_, const conf::Config &c, pool::Pool &p) : io(io_), config(c), pool(p) {}

    asio::io_context &io;
    const conf::Config &config;
    pool::Pool &pool;
    Limits limits;
    std::string default_host; // for HTTP/1.0 requests without Host
    std::list<Conn *> conns;
    bool draining = false;
    std::uint64_t requests = 0;
};

awaitable<void> http_session(SharedState &state, tcp::socket socket);

} // namespace ferry::server::detail
