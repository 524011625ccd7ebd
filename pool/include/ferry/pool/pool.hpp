// A supervised pool of long-running PHP worker processes (design §3, protocol.md §2).
#pragma once

#include "ferry/pool/asio.hpp"
#include "ferry/relay/context.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::pool {

struct Options {
    std::vector<std::string> command; // argv[0] is looked up in PATH
    std::vector<std::string> env;     // "K=V" entries added to the server's environment
    std::string mode = "http";        // RR_MODE
    unsigned num_workers = 1;
    std::uint64_t max_jobs = 0; // 0 = unlimited
    std::chrono::milliseconds allocate_timeout{60000};
    std::chrono::milliseconds destroy_timeout{60000};
    std::chrono::milliseconds boot_timeout{60000}; // PID handshake must finish within this
    std::uint32_t max_frame_payload = 1u << 30;    // largest response frame accepted (1 GiB)
};

enum class Outcome {
    ok,             // `response` and `body` are filled (or the body was streamed through the sink)
    worker_error,   // the worker sent an ERROR frame: answer the configured internal error code
    worker_crashed, // the worker died or broke the protocol mid-request: 502
    no_worker,      // no worker within allocate_timeout, or the pool is shutting down / unhealthy: 503
    cancelled,      // the sink asked to stop (client gone)
};

struct Result {
    Outcome outcome = Outcome::ok;
    std::string message;             // why, for logs and error bodies
    relay::ResponseContext response; // status + headers (outcome ok)
    bool streamed = false;           // the body went through StreamSink
    int worker_pid = 0;
};

// Receives a streamed response (frames with the STREAM bit), in order.
class StreamSink {
public:
    virtual ~StreamSink() = default;
    // An informational 1xx response (status 100..199 with no body) sent before the final one.
    virtual awaitable<bool> on_informational(const relay::ResponseContext &head) = 0;
    // A chunk of the final response; `head` is the first frame's context. `last` = final frame.
    // Return false when the client is gone: the pool stops the stream.
    virtual awaitable<bool> on_chunk(const relay::ResponseContext &head, std::string_view body,
                                     bool last) = 0;
};

struct WorkerInfo {
    int pid = 0;
    std::string state; // spawning, ready, working, stopping
    std::uint64_t jobs = 0;
    std::chrono::system_clock::time_point created;
};

class Pool {
public:
    Pool(asio::io_context &io, Options options);
    ~Pool();
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;

    // Spawns the workers and waits until all are ready or one boot failed (returns its error text;
    // "" on success). The pool keeps retrying with back-off either way.
    awaitable<std::string> start();

    // Runs one request on a worker: allocate, send the frame, read the reply. Retries on another worker
    // when a worker asks to stop instead of answering. `body_out` receives a non-streamed body.
    awaitable<Result> exec(const relay::RequestContext &ctx, std::string_view body, std::string &body_out,
                           StreamSink *sink);

    // Stops every worker (stop frame, then SIGTERM/SIGKILL after destroy_timeout). Busy workers finish first.
    awaitable<void> shutdown();

    std::vector<WorkerInfo> workers() const;
    unsigned serving_workers() const; // ready or working
    std::uint64_t spawned_total() const;
    std::uint64_t recycled_total() const;

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::pool
