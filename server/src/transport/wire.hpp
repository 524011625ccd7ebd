// What a handler writes its answer to (internal to server/): one HTTP/1.1 connection (Transport), or one
// HTTP/2 stream (h2/stream.hpp), which turns the same HTTP/1.1 bytes into HEADERS and DATA frames. Handlers
// serialise responses as HTTP/1.1 (http/response.hpp) either way: one serialiser, one set of header rules.
#pragma once

#include "ferry/base/io.hpp"
#include "transport/stream.hpp"

#include <cstdint>
#include <span>
#include <string>

namespace ferry::server::detail {

class Wire {
public:
    virtual ~Wire() = default;

    virtual const std::string &remote() const = 0; // the peer's address, "" if unknown
    virtual SSL *tls() const = 0;                  // the connection's TLS session (null: plain)
    // The connection's descriptor, for questions that read nothing (pool::Client: has the client left?).
    virtual int native_handle() = 0;
    // Bytes of this answer (or connection) handed on so far: the access log's and /metrics' sizes.
    virtual std::uint64_t sent() const = 0;

    // Writes all of `bufs` (at most 4). False when the client is gone or stalled past the write timeout.
    // `more`: a body follows at once (send_file): a small head may wait to go out with it.
    virtual awaitable<bool> write(std::span<const asio::const_buffer> bufs, bool more = false) = 0;
    // Writes and empties `out`.
    virtual awaitable<bool> flush(std::string &out, bool more = false) = 0;
    enum class Sent { all, client_gone, file_short };
    // Sends `count` bytes of the file `fd` from `offset`. file_short: the file ended early (truncated while
    // sent): the caller must close.
    virtual awaitable<Sent> send_file(int fd, std::uint64_t offset, std::uint64_t count) = 0;
    // A protocol switch (WebSocket, an event stream) takes the byte stream over; the Wire then holds nothing.
    virtual Stream take_stream() = 0;
    // The client closed or reset its side and nobody will read an answer (nginx's 499).
    virtual bool client_left() = 0;
};

} // namespace ferry::server::detail
