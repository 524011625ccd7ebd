// A small HTTP listener for probes and scrapers (internal to server/): the status endpoints and /metrics.
// One request per connection, parsed by the server's own HTTP parser, answered by a coroutine, then the
// connection closes; a client that does not finish its request within 5 s is dropped, at most 64 at once.
// Runs on the loop it is given (loops[0]).
#pragma once

#include "ferry/conf/config.hpp"
#include "ferry/conf/result.hpp"
#include "ferry/relay/io.hpp"
#include "ferry/server/http_parser.hpp"

#include <functional>
#include <memory>
#include <string>

namespace ferry::server::detail {

class ProbeServer {
public:
    // Appends the whole response to `out`.
    using Answer = std::function<awaitable<void>(std::string &out, const Request &req)>;

    // `key` names the address in errors ("status.address"); `component` is the log's.
    ProbeServer(asio::io_context &io, conf::Address address, std::string key, std::string component);
    ~ProbeServer();
    ProbeServer(const ProbeServer &) = delete;
    ProbeServer &operator=(const ProbeServer &) = delete;

    // Binds the address (nothing is answered before run()); the error names the key.
    Result<void> bind();
    void run(Answer answer);
    void stop();
    std::string address() const; // host:port as bound

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::server::detail
