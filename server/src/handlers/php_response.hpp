// A PHP worker's answer written to the client (internal to server/): what Pool::exec gives (pool::Reply) is
// pulled and written here, the pool never writing to a client itself. 1xx heads go out as they come; a
// whole body with Content-Length (batched with other pipelined answers when small); a stream chunked as the
// worker sends it, each chunk written before the next is read (the client's pace is the worker's); a large
// body left in the worker's own buffer (over the body budget) goes to a temp file first, so the worker is
// free before a slow client reads it.
#pragma once

#include "ferry/pool/pool.hpp"
#include "handler.hpp"
#include "http/body_stream.hpp"

#include <optional>
#include <string_view>

namespace ferry::server::detail {

struct SharedState;

class ResponseWriter {
public:
    // `keep_alive`: what the request allows (the server draining says no).
    ResponseWriter(const SharedState &st, Exchange &ex, bool keep_alive);
    ~ResponseWriter();
    ResponseWriter(const ResponseWriter &) = delete;
    ResponseWriter &operator=(const ResponseWriter &) = delete;

    // Writes the informational heads of `*reply` (103 Early Hints) and reads on to its final head. False when
    // the client is gone (the reply is then finished: the worker's stream stopped).
    awaitable<bool> informational(pool::Reply *reply);
    // A whole reply whose body is its own (reply.holds_worker() false: the common case): its head into
    // ex.out; with more pipelined requests buffered a small body joins it there (nullopt: nothing to write
    // now), else the body to write after ex.out in one writev (empty for HEAD, 1xx, 204, 304). The caller
    // writes it: no coroutine frame here.
    std::optional<std::string_view> prepare_whole(const pool::Reply &reply);
    // Writes the rest of any other reply whose final head was read (outcome ok): a stream, or a body in the
    // worker's buffer; then finishes it. False when the connection must close: the client is gone, a stream
    // was cut (a failure mid-way sets reply.outcome), or the answer said so.
    awaitable<bool> write(pool::Reply *reply);
    // The head of a stream went out: a failure now can only cut the response short.
    bool started() const { return stream_.started(); }
    // Whether the connection may carry another request after what was written.
    bool keep_alive() const { return keep_alive_ && (!stream_.started() || stream_.keep_alive()); }

private:
    // (Pointers, not references: GCC 12 passes a member coroutine's reference parameter wrong.)
    awaitable<bool> write_stream(pool::Reply *reply);
    awaitable<bool> write_held(pool::Reply *reply);
    // The head of a whole response (Content-Length: `size`) into ex.out; false when no body follows (HEAD,
    // 1xx, 204, 304, an empty body).
    bool append_whole_head(const relay::ResponseContext &rc, std::size_t size, int worker_pid);
    // A body into an unnamed temp file (disk, not the server's memory); false when none can be had.
    bool spill(std::string_view body);

    const SharedState &st_;
    Exchange &ex_;
    BodyStream stream_;
    bool head_request_, keep_alive_;
    int spill_fd_ = -1;
    std::size_t spill_size_ = 0;
};

// The status a worker's head gives the client: its own when 200-599, else 500 (logged).
int final_status(int status, int pid);

} // namespace ferry::server::detail
