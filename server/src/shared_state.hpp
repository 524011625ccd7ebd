// State shared by the listener and every HTTP session (internal to server/).
#pragma once

#include "ferry/conf/config.hpp"
#include "ferry/relay/io.hpp"
#include "ferry/pool/pool.hpp"
#include "ferry/server/http_parser.hpp"
#include "timer_wheel.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <list>

namespace ferry::server::detail {

using tcp = asio::ip::tcp;

// One per connection, registered while its session runs. Its deadline lives in the loop's timer wheel: when
// it passes, the ticker cancels the socket's pending operation and sets `timed_out`.
struct Conn : WheelEntry {
    tcp::socket *socket = nullptr;
    bool idle = true; // waiting for the first byte of a request
    bool timed_out = false;
};

struct SharedState {
    SharedState(asio::io_context &io_, const conf::Config &c, pool::Pool &p, pool::Budget &b)
        : io(io_), config(c), pool(p), budget(b)
    {
    }

    asio::io_context &io;
    const conf::Config &config;
    pool::Pool &pool;
    pool::Budget &budget; // request and response bodies in memory, all connections together
    std::string temp_dir; // where request bodies too large for memory go
    Limits limits;
    std::string default_host; // for HTTP/1.0 requests without Host
    std::list<Conn *> conns;
    TimerWheel wheel;

    void arm(Conn &c, std::chrono::milliseconds timeout) { wheel.schedule(c, steady::now() + timeout); }
    void arm_at(Conn &c, steady::time_point t) { wheel.schedule(c, t); }
    void disarm(Conn &c) { wheel.cancel(c); }
    bool draining = false;
    std::uint64_t requests = 0;
};

awaitable<void> http_session(SharedState &state, tcp::socket socket);

} // namespace ferry::server::detail
