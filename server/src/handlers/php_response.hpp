// A PHP worker's answer written to the client (internal to server/): what Pool::exec gives (pool::Reply) is
// pulled and written here, the pool never writing to a client itself. 1xx heads go out as they come; a
// whole body with Content-Length (batched with other pipelined answers when small); a stream chunked as the
// worker sends it, each chunk written before the next is read (the client's pace is the worker's); a large
// body left in the worker's own buffer (over the body budget) goes to a temp file first, so the worker is
// free before a slow client reads it.
#pragma once

#include "compress/policy.hpp"
#include "ferry/pool/pool.hpp"
#include "handler.hpp"
#include "http/body_stream.hpp"

#include <memory>
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
    // Whether prepare_whole() may answer `reply` (a whole body, its own): not when its body is to be
    // compressed and is larger than compress::slice_size (write() then compresses it in slices, the loop
    // served between them).
    bool whole_at_once(const pool::Reply &reply);
    // Whether `reply`'s body is to be compressed.
    bool compresses(const pool::Reply &reply) { return plan(reply).coding != compress::Coding::identity; }
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
    // A whole body compressed in slices: into a temp file when it is in the worker's buffer (the worker is
    // free before a slow client reads it), else straight to the client as a stream.
    awaitable<bool> write_compressed(pool::Reply *reply);
    // How the reply's final head is compressed (decided once: compress/policy.hpp).
    const compress::Plan &plan(const pool::Reply &reply);
    // An encoder for a body compressed across writes, if http.compression.max_streams allows one (else the
    // body goes uncompressed: plan_.coding becomes identity).
    bool take_encoder(std::size_t size_hint);
    int level() const;
    // The head of a whole response (Content-Length: `size`) into ex.out; false when no body follows (HEAD,
    // 1xx, 204, 304, an empty body).
    bool append_whole_head(const relay::ResponseContext &rc, std::size_t size, int worker_pid);
    // A body into an unnamed temp file (disk, not the server's memory); false when none can be had.
    bool spill(std::string_view body);
    // The same through encoder_, in slices with the loop served between them; false when no temp file.
    awaitable<bool> spill_encoded(std::string_view body);
    bool write_fd(int fd, std::string_view data); // all of it, or false (logged)

    const SharedState &st_;
    Exchange &ex_;
    BodyStream stream_;
    bool head_request_, keep_alive_;
    int spill_fd_ = -1;
    std::size_t spill_size_ = 0;
    compress::Plan plan_;
    bool planned_ = false;
    std::string packed_;                         // a whole body compressed at once
    std::unique_ptr<compress::Encoder> encoder_; // a body compressed across writes (holds a max_streams slot)
    std::uint64_t encoded_in_ = 0, encoded_out_ = 0; // what spill_encoded() took and wrote
};

// The status a worker's head gives the client: its own when 200-599, else 500 (logged).
int final_status(int status, int pid);

} // namespace ferry::server::detail
