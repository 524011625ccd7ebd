// One worker's duplex frame channel over pipes (docs/architecture.md, "Workers"; docs/protocol.md §1-§4):
// request frames go to the worker's stdin, response frames come from its stdout, and nothing else may come
// from there.
//
// Reads happen when an exchange needs a frame. While the worker is idle (watch()) a readiness wait is
// outstanding on stdout, so bytes that arrive while no exchange expects them (a second response, a late
// frame, a stray echo) are reported through `on_unexpected` at once and never given to a request. Before
// every request is written, claim() reads the pipe once (EAGAIN when quiet), so bytes that came while it was
// idle but whose wait handler has not run yet, or that a worker handed straight from its last reply to the
// next request wrote after that reply, are caught before the request goes out. A busy exchange reads its
// reply directly (the cheapest path); the first frame of a reply is taken only once the request has left the
// worker's stdin (request_unread(): FIONREAD), since a worker answers only what it has read — a frame that
// comes earlier is an earlier request's late output (ChannelError::premature), and the request never ran.
#pragma once

#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/relay/frame.hpp"

#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace ferry::relay {

// Why a channel stopped giving frames.
enum class ChannelError {
    none,
    closed,      // EOF or a read error: the process is gone or closed its stdout
    not_a_frame, // bytes that are not a Goridge frame (a stray echo, a PHP warning), or bytes nobody asked
                 // for
    timed_out,   // the deadline armed with arm() passed, or expire()
    premature,   // the first frame of a reply came while the request was still unread in the worker's stdin:
                 // output of an earlier request; the request itself never ran
};

// A whole frame in the channel's read buffer: valid until consume_frame(), end_exchange() or take_frame().
struct Frame {
    FrameHeader header;
    std::string_view payload;
};

class Channel : public std::enable_shared_from_this<Channel> {
public:
    // Frames with a payload above `max_payload` are refused (not_a_frame).
    Channel(asio::io_context &io, std::uint32_t max_payload);
    ~Channel();
    Channel(const Channel &) = delete;
    Channel &operator=(const Channel &) = delete;

    // The worker's stdin (we write; non-blocking, written with write_all_fast) and stdout (we read).
    asio::writable_pipe &stdin_pipe() { return in_; }
    asio::readable_pipe &stdout_pipe() { return out_; }

    // Called with a description of the bytes when output arrives while no exchange is open. The channel is
    // broken from then on; its owner retires the worker.
    std::function<void(const std::string &what)> on_unexpected;

    // The worker is idle (or was just spawned): keep a read outstanding on stdout (nothing if one is).
    void watch();
    // A request is about to be written to this idle (watched) worker: reads what its pipe holds already,
    // which arrived while no request was in flight (on_unexpected is called; the channel is broken). False
    // when the channel is broken. Nothing to do (true) for a worker that is not watched.
    bool claim();
    // True while bytes written to the worker's stdin are still unread (FIONREAD on the pipe).
    bool request_unread();
    // An exchange (handshake or request) begins: frames are expected until end_exchange().
    void begin_exchange();
    // Waits for the next whole frame. The error says why there is none (EOF, non-frame bytes, a deadline);
    // error_kind() tells them apart.
    awaitable<Result<Frame>> next_frame();
    ChannelError error_kind() const { return failure_; }
    bool broken() const { return failure_ != ChannelError::none; }
    // Releases the current frame; the next one may be read.
    void consume_frame();
    // Releases the current frame and closes the exchange. An error (and on_unexpected is NOT called: the
    // caller decides) when bytes beyond the frame are already buffered: the worker wrote more than one reply;
    // the channel is broken then. With `check_quiet`, one read of the pipe at once does the same for bytes
    // already written behind the reply.
    Result<void> end_exchange(bool check_quiet = true);
    // Moves the current frame's buffer out without a copy when it holds nothing else (the payload keeps its
    // address inside it); the channel continues with a fresh small buffer. Empty when it cannot.
    FrameBuffer take_frame();

    // Writes all of `buffers` (at most 4): one direct writev first (see write_all_fast). Not a coroutine: no
    // frame of its own. `buffers` must stay valid until the returned awaitable completes.
    awaitable<error_code> write(std::span<const asio::const_buffer> buffers)
    {
        return write_all_fast(in_, buffers);
    }
    // Writes one whole frame (control frames: handshake, stop, PONG, STOP).
    awaitable<Result<void>> send(const std::string &frame);

    // Fails the pending and future frame waits of this exchange with timed_out after `limit` (0 = never).
    // Safe against the timer having fired but its handler not yet run: every arm()/disarm() starts a new
    // generation, and a handler of an old one does nothing.
    void arm(std::chrono::milliseconds limit);
    void disarm();
    // Fails the exchange in progress now with timed_out (a supervisor's limit).
    void expire(std::string why);
    // After the event loop stopped for good: destroys the exchange suspended in next_frame(), which holds
    // this channel's owner while the channel holds it (a cycle nothing else would break).
    void abandon() { waiter_.reset(); }

private:
    enum class Parsed { frame, need_more, failed, unexpected };
    void prepare_read();
    void on_readable(error_code ec);
    Parsed read_now(); // one non-blocking read into the buffer (only once an async operation made it so)
    Parsed absorb(error_code ec, std::size_t n);
    Parsed parse();
    void set_failure(ChannelError kind, std::string error);
    void break_off(ChannelError kind, std::string error); // fails the exchange now
    void notify();
    void ensure_capacity(std::size_t needed);
    void fresh_buffer();

    asio::writable_pipe in_;
    asio::readable_pipe out_;
    std::uint32_t max_payload_;
    FrameBuffer rbuf_;
    std::size_t rpos_ = 0, rend_ = 0, frame_end_ = 0;
    FrameHeader hdr_;
    bool reading_ = false, direct_read_ = false, frame_ready_ = false, expecting_ = false;
    bool first_frame_ = false; // the next frame is the first of this exchange's reply
    bool waiting_ = false;     // the idle watch's readiness wait is outstanding
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

} // namespace ferry::relay
