// One connection to Redis, on the loop that owns it (internal to server/; docs/cluster.md): commands queued
// and written in order, replies read one at a time (resp.hpp parses them). The broker keeps two: one for
// commands (PUBLISH), one in subscribed mode (SUBSCRIBE, and the messages that come).
#pragma once

#include "broker/resp.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <string>

namespace ferry::server::detail::broker {

class RedisConn : public std::enable_shared_from_this<RedisConn> {
public:
    using clock = std::chrono::steady_clock;
    explicit RedisConn(asio::any_io_executor ex) : sock_(ex) {}

    // Connects to `a` (a name is resolved) within `timeout`.
    awaitable<Result<void>> connect(const conf::Address &a, conf::Duration timeout);
    // Queues one command (written at once if the socket takes it); `pending` counts it.
    void send(std::initializer_list<std::string_view> args);
    // For many commands at once: append them to out() (append_command), then kick().
    std::string &out() { return out_; }
    void kick();
    // The next reply; an error says why there is none (the server closed, I/O, not RESP, `within` passed).
    awaitable<Result<Reply>> read(conf::Duration within = conf::Duration::zero());
    void close();
    bool open() const { return sock_.is_open(); }
    std::size_t queued() const { return out_.size() + writing_.size(); } // bytes not written yet

    std::size_t pending = 0;       // commands whose reply has not come yet
    clock::time_point last_read{}; // when the last bytes came
    std::string error;             // why a write failed (the reader then sees the socket closed)

private:
    awaitable<void> write_loop(std::shared_ptr<RedisConn> keep);
    asio::ip::tcp::socket sock_;
    ReplyReader reader_;
    std::string out_, writing_;
    bool writing = false;
    std::array<char, 16384> buf_;
};

} // namespace ferry::server::detail::broker
