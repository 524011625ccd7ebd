// One worker process and its duplex frame channel over stdin/stdout (internal to pool/).
#pragma once

#include "ferry/relay/io.hpp"
#include "ferry/pool/pool.hpp"
#include "ferry/relay/context.hpp"
#include "ferry/relay/frame.hpp"

#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ferry::pool {

// spawning → ready → working → ready | stopping → dead (RoadRunner's worker states, design §3).
enum class State { spawning, ready, working, stopping, dead };

const char *state_name(State s);
// "exited with code 3", "killed by signal 9 (SIGKILL)".
std::string describe_status(int wait_status);

// Why a frame wait ended without a frame.
enum class ChannelError {
    none,
    closed,      // EOF or a read error: the process is gone or closed its stdout
    not_a_frame, // bytes that are not a Goridge frame (a stray echo, a PHP warning)
    timed_out,   // the deadline armed with arm() passed
};

struct Worker : std::enable_shared_from_this<Worker> {
    Worker(asio::io_context &io, std::uint32_t max_payload);
    ~Worker();

    int pid = 0;
    State state = State::spawning;
    asio::writable_pipe in;  // request frames (non-blocking: written with write_all_fast)
    asio::readable_pipe out; // response frames only
    asio::readable_pipe err; // the worker's log
    relay::Codec codec = relay::Codec::json;
    std::string wbuf; // the request context being encoded
    std::uint64_t jobs = 0;
    std::uint64_t max_jobs = 0;   // with jitter; 0 = unlimited
    bool retire = false;          // recycle as soon as a replacement is ready
    bool stop_on_release = false; // stop when the current request is done
    bool exited = false;
    int wait_status = 0;
    asio::steady_timer exit_timer; // cancelled by the reaper when the process is gone
    std::chrono::system_clock::time_point created = std::chrono::system_clock::now();
    std::string stderr_tail; // last bytes of stderr, for boot error messages

    std::string tag() const { return "worker " + std::to_string(pid); }

    // ---- the frame channel ---------------------------------------------------------------------------
    // Reads happen when an exchange needs a frame, and while the worker is idle (watch()): a read is then
    // outstanding on stdout, so bytes that arrive while no exchange expects them (a second response, a late
    // frame, a stray echo) are reported through `on_unexpected` at once and never given to a request. That
    // idle read becomes the next exchange's first read: watching costs no system call. A worker handed from
    // one request straight to the next is not watched in between (that read would cost one per request);
    // end_exchange(check_quiet) does it when asked.

    // Called with a description of the bytes when output arrives while no exchange is open, or when an
    // exchange ends with bytes left over. The worker is broken; the pool retires it.
    std::function<void(const std::string &what)> on_unexpected;

    // Starts watching stdout (after spawning; the handshake's read follows).
    void start_reading();
    // The worker is idle: keep a read outstanding on stdout (nothing if one is).
    void watch();
    // An exchange (handshake or request) begins: frames are expected until end_exchange().
    void begin_exchange();
    // Waits for the next whole frame. False with `error` set (and error_kind()) on EOF, non-frame bytes or a
    // deadline. The frame stays valid until consume_frame().
    awaitable<bool> next_frame(relay::FrameHeader &h, std::string_view &payload, std::string &error);
    ChannelError error_kind() const { return failure_; }
    // Releases the current frame; the next one may be read.
    void consume_frame();
    // Releases the current frame and closes the exchange. False (and on_unexpected is NOT called: the
    // caller decides) when bytes beyond the frame are already buffered: the worker wrote more than one reply.
    // With `check_quiet`, a read starts at once, whose result shows whether more is already on its way.
    bool end_exchange(std::string &leftover, bool check_quiet = true);
    // Moves the current frame's buffer out without a copy when it holds nothing else (`offset` = where the
    // payload starts); the channel continues with a fresh small buffer. Empty when it cannot.
    FrameBuffer take_frame(std::size_t &offset);

    // Fails the pending and future frame waits of this exchange with timed_out after `limit` (0 = never).
    // Safe against the timer having fired but its handler not yet run: every arm()/disarm() starts a new
    // generation, and a handler of an old one does nothing.
    void arm(std::chrono::milliseconds limit);
    void disarm();
    // After the event loop stopped for good: destroys the exchange suspended in next_frame(), which holds
    // this worker while the worker holds it (a cycle nothing else would break).
    void abandon() { waiter_.reset(); }
    // Fails the exchange in progress now with timed_out (the supervisor's exec_ttl).
    void expire(std::string why);
    bool broken() const { return failure_ != ChannelError::none; }

    // Request in progress, for the supervisor (exec_ttl, slow-request warning) and its log lines.
    std::chrono::steady_clock::time_point exec_started;
    const relay::RequestContext *exec_ctx = nullptr;
    bool exec_warned = false;
    std::uint64_t replies = 0; // exchanges ended, for the sampled quiet check

    awaitable<bool> write_all(const std::string &bytes);
    // Signals the worker's process group (its children too); nothing once it has exited.
    void signal(int sig) const;
    // After the process exited: ends what is left of its process group (a child it started).
    void kill_group() const;

private:
    enum class Parsed { frame, need_more, failed, unexpected };
    void prepare_read();
    void on_read(error_code ec, std::size_t n);
    Parsed absorb(error_code ec, std::size_t n);
    Parsed parse();
    void set_failure(ChannelError kind, std::string error);
    void fail(ChannelError kind, std::string error);
    void notify();
    void ensure_capacity(std::size_t needed);

    std::uint32_t max_payload_;
    FrameBuffer rbuf_;
    std::size_t rpos_ = 0, rend_ = 0, frame_end_ = 0;
    relay::FrameHeader hdr_;
    bool reading_ = false, direct_read_ = false, frame_ready_ = false, expecting_ = false;
    ChannelError failure_ = ChannelError::none;
    std::string error_;
    // The exchange waiting in next_frame() (its completion handler, type-erased: Boost 1.81's
    // any_completion_handler recurses into itself when moved).
    struct Resume {
        virtual ~Resume() = default;
        virtual void resume() = 0;
    };
    template <typename Handler> struct ResumeWith final : Resume {
        explicit ResumeWith(Handler &&h) : handler(std::move(h)) {}
        void resume() override { std::move(handler)(); }
        Handler handler;
    };
    std::unique_ptr<Resume> waiter_;

    asio::steady_timer deadline_;
    std::chrono::milliseconds deadline_limit_{0};
    std::uint64_t generation_ = 0;
};

using WorkerPtr = std::shared_ptr<Worker>;

} // namespace ferry::pool
