// One request on one worker (internal to pool/), the protocol of docs/protocol.md §2-§4: the request frame
// (header, context, body) written with one gather write, then the reply read frame by frame as the caller of
// Pool::exec pulls it (Reply): a single frame, an ERROR frame, a stop request, or a stream (1xx first,
// PING/PONG, STOP when the caller finishes before its end). The exchange says what it saw; the pool decides
// the worker's fate (AfterReply).
//
// Per request: prepare() is a plain function (no coroutine frame, no system call), the pool writes the frame
// through the channel itself, and read() is the one coroutine frame of the exchange.
#pragma once

#include "ferry/pool/pool.hpp"
#include "ferry/relay/frame.hpp"
#include "worker.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace ferry::pool {

// What the pool does with the worker after an exchange.
enum class AfterReply {
    release,    // the reply was read whole and nothing followed it: the worker takes the next request
    kill,       // the worker died or broke the protocol: end it (a replacement starts)
    kill_later, // a supervisor limit failed the exchange: the client gets its 504 first, then the worker ends
    stop_retry, // the worker asked to stop instead of answering: stop it; the request goes to another worker
    kill_retry, // the same, but it wrote more after its stop request: end it
    kill_resend, // its reply came before it had read the request (an earlier request's late output): end
                 // it; the request never ran and goes to another worker
    hold,        // the Reply holds the worker (a stream goes on, or its body is the worker's buffer): the
                 // pool settles it when the caller finishes the Reply (Shard::settle)
};

// A request frame's header and buffers, filled by WorkerExchange::prepare(); lives in the caller's frame
// until the write is done.
struct RequestFrame {
    std::uint8_t head[relay::max_header_size];
    std::array<asio::const_buffer, 3> buffers; // header, context, body in memory
    std::size_t count = 3;                     // 2 when the body comes from a file (write_file)
    std::span<const asio::const_buffer> parts() const { return {buffers.data(), count}; }
};

class WorkerExchange {
public:
    explicit WorkerExchange(const Options &opt) : opt_(opt) {}

    // Encodes the request for `w` (its codec, its buffer) and opens the exchange. No system call.
    void prepare(Worker &w, const relay::RequestContext &ctx, const BodyRef &body, RequestFrame &out) const;
    // Sends a request body spilled to a file: read in pieces, each written like any frame part.
    static awaitable<error_code> write_file(asio::writable_pipe &pipe, int fd, std::uint64_t size);

    // Reads the reply's next piece into `res`: its first head (with the whole body, or a stream's first
    // chunk), or, once one was given, the next head or chunk. Everything the pool must know is in the return
    // value; `res` says what the client gets.
    awaitable<AfterReply> read(WorkerPtr w, Reply &res);
    // The caller finished the Reply before the stream's end: STOP, then drain to the final frame
    // (docs/protocol.md §4).
    awaitable<AfterReply> cancel_stream(WorkerPtr w);
    // The last frame of a reply is handled: close the exchange (release), or retire the worker (kill) when it
    // wrote more than one reply (those bytes go to nobody).
    AfterReply finish(Worker &w);

private:
    // The whole body of a single-frame reply: copied, handed over, or left in the worker's buffer (hold).
    AfterReply take_body(Worker &w, Reply &res, std::string_view body);
    AfterReply crashed(Worker &w, Reply &res, const std::string &why);

    const Options &opt_;
};

} // namespace ferry::pool
