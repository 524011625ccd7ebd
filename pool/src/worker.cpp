#include "worker.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <sys/wait.h>

namespace ferry::pool {

namespace {
constexpr std::size_t initial_read_buffer = 16 * 1024;

// Unexpected stdout bytes for a log line: a frame is shown with its flags and payload, anything else as is.
std::string describe_output(std::string_view bytes, std::uint32_t max_payload)
{
    relay::FrameHeader h;
    auto r = relay::decode_header(bytes, h, max_payload);
    std::string out = std::to_string(bytes.size()) + " byte(s): ";
    if (r.status != relay::DecodeStatus::ok)
        return out + "\"" + relay::printable(bytes, 160) + "\"";
    std::string_view payload = bytes.substr(std::min(bytes.size(), h.size()));
    return out + "a frame (flags " + std::to_string(h.flags) + ", " + std::to_string(h.payload_size) +
           "-byte payload \"" + relay::printable(payload.substr(0, h.payload_size), 160) + "\")";
}
} // namespace

const char *state_name(State s)
{
    switch (s) {
    case State::spawning:
        return "spawning";
    case State::ready:
        return "ready";
    case State::working:
        return "working";
    case State::stopping:
        return "stopping";
    case State::dead:
        return "stopped";
    }
    return "?";
}

std::string describe_status(int status)
{
    if (WIFEXITED(status))
        return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = sigabbrev_np(sig);
        return "killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
    }
    return "ended with status " + std::to_string(status);
}

Worker::Worker(asio::io_context &io, std::uint32_t max_payload)
    : in(io), out(io), err(io), exit_timer(io), max_payload_(max_payload), deadline_(io)
{
    rbuf_.data.reset(new char[initial_read_buffer]);
    rbuf_.capacity = initial_read_buffer;
}

Worker::~Worker() = default;

void Worker::start_reading()
{
    watch();
}

void Worker::watch()
{
    if (reading_ || frame_ready_ || failure_ != ChannelError::none)
        return;
    prepare_read();
    reading_ = true;
    out.async_read_some(asio::buffer(rbuf_.data.get() + rend_, rbuf_.capacity - rend_),
                        [self = shared_from_this()](error_code ec, std::size_t n) { self->on_read(ec, n); });
}

void Worker::prepare_read()
{
    if (rend_ == rbuf_.capacity)
        ensure_capacity(rend_ - rpos_ + 1);
}

// The watch's read completed (idle, or the first read of an exchange that began meanwhile).
void Worker::on_read(error_code ec, std::size_t n)
{
    reading_ = false;
    switch (absorb(ec, n)) {
    case Parsed::need_more:
        if (expecting_ && !waiter_)
            return; // the exchange reads the rest itself when it asks for its frame
        watch();
        return;
    case Parsed::unexpected:
        if (on_unexpected)
            on_unexpected(error_);
        return;
    case Parsed::frame:
    case Parsed::failed:
        notify();
        return;
    }
}

Worker::Parsed Worker::absorb(error_code ec, std::size_t n)
{
    if (ec) {
        std::string_view avail(rbuf_.data.get() + rpos_, rend_ - rpos_);
        if (ec != asio::error::eof)
            set_failure(ChannelError::closed, "reading from the worker failed: " + ec.message());
        else if (avail.empty())
            set_failure(ChannelError::closed, "worker closed its stdout");
        else
            set_failure(ChannelError::closed, "worker closed its stdout in the middle of a frame after: \"" +
                                                  relay::printable(avail) + "\"");
        return Parsed::failed;
    }
    rend_ += n;
    return parse();
}

Worker::Parsed Worker::parse()
{
    if (failure_ != ChannelError::none)
        return Parsed::failed;
    std::string_view avail(rbuf_.data.get() + rpos_, rend_ - rpos_);
    if (!expecting_) {
        if (avail.empty())
            return Parsed::need_more;
        // Nobody asked: a second response, a late frame, a stray echo. Never hand it to a request.
        set_failure(ChannelError::not_a_frame,
                    "on stdout while no request was in flight " + describe_output(avail, max_payload_));
        return Parsed::unexpected;
    }
    auto r = relay::decode_header(avail, hdr_, max_payload_);
    if (r.status == relay::DecodeStatus::error) {
        set_failure(ChannelError::not_a_frame, r.error);
        return Parsed::failed;
    }
    if (r.status == relay::DecodeStatus::ok && avail.size() >= r.needed) {
        frame_end_ = rpos_ + r.needed;
        frame_ready_ = true;
        return Parsed::frame;
    }
    ensure_capacity(std::max(r.needed, avail.size() + 1));
    return Parsed::need_more;
}

void Worker::ensure_capacity(std::size_t needed)
{
    std::size_t have = rend_ - rpos_;
    if (rpos_ + needed <= rbuf_.capacity)
        return;
    if (needed <= rbuf_.capacity) {
        std::memmove(rbuf_.data.get(), rbuf_.data.get() + rpos_, have);
    } else {
        // A frame whose size is known gets exactly its size (no doubling, no zero-filling of a large body).
        std::size_t cap = std::max(needed, std::min<std::size_t>(2 * rbuf_.capacity, 1 << 20));
        std::unique_ptr<char[]> fresh(new char[cap]);
        std::memcpy(fresh.get(), rbuf_.data.get() + rpos_, have);
        rbuf_.data = std::move(fresh);
        rbuf_.capacity = cap;
    }
    frame_end_ -= std::min(frame_end_, rpos_);
    rpos_ = 0;
    rend_ = have;
}

void Worker::set_failure(ChannelError kind, std::string error)
{
    if (failure_ != ChannelError::none)
        return;
    failure_ = kind;
    error_ = std::move(error);
}

void Worker::fail(ChannelError kind, std::string error)
{
    set_failure(kind, std::move(error));
    if (direct_read_) { // an exchange waits in its own read: end it
        error_code ignored;
        out.cancel(ignored);
    }
    notify();
}

void Worker::notify()
{
    if (!waiter_)
        return;
    // Resumes the waiting exchange inline: we are on its io_context's thread, inside a completion handler.
    auto w = std::move(waiter_);
    w->resume();
}

void Worker::begin_exchange()
{
    expecting_ = true;
}

awaitable<bool> Worker::next_frame(relay::FrameHeader &h, std::string_view &payload, std::string &error)
{
    while (!frame_ready_ && failure_ == ChannelError::none) {
        if (reading_) {
            // The idle watch's read is outstanding: it becomes this exchange's read; wait for it.
            co_await asio::async_initiate<decltype(nothrow), void()>(
                [this](auto handler) {
                    waiter_ = std::make_unique<ResumeWith<decltype(handler)>>(std::move(handler));
                },
                nothrow);
            continue;
        }
        // A busy worker: read directly, as cheaply as a plain read loop.
        prepare_read();
        reading_ = direct_read_ = true;
        auto [ec, n] = co_await out.async_read_some(
            asio::buffer(rbuf_.data.get() + rend_, rbuf_.capacity - rend_), nothrow);
        reading_ = direct_read_ = false;
        absorb(ec, n);
    }
    if (frame_ready_) {
        h = hdr_;
        payload = std::string_view(rbuf_.data.get() + rpos_ + h.size(), h.payload_size);
        co_return true;
    }
    error = error_;
    co_return false;
}

void Worker::consume_frame()
{
    frame_ready_ = false;
    rpos_ = frame_end_;
    if (rpos_ == rend_)
        rpos_ = rend_ = frame_end_ = 0;
    parse(); // a frame already buffered is ready for the next next_frame(); otherwise it reads then
}

bool Worker::end_exchange(std::string &leftover, bool check_quiet)
{
    frame_ready_ = false;
    expecting_ = false;
    rpos_ = frame_end_;
    if (rpos_ < rend_) {
        std::string_view rest(rbuf_.data.get() + rpos_, rend_ - rpos_);
        leftover = "on stdout after its response " + describe_output(rest, max_payload_);
        failure_ = ChannelError::not_a_frame;
        error_ = leftover;
        return false;
    }
    rpos_ = rend_ = frame_end_ = 0;
    if (rbuf_.capacity > 1024 * 1024) {
        rbuf_.data.reset(new char[initial_read_buffer]);
        rbuf_.capacity = initial_read_buffer;
    }
    if (check_quiet)
        watch(); // its speculative read sees at once what the worker wrote after its reply
    return true;
}

FrameBuffer Worker::take_frame(std::size_t &offset)
{
    FrameBuffer out_buf;
    if (!frame_ready_ || frame_end_ != rend_)
        return out_buf;
    offset = rpos_ + hdr_.size();
    out_buf = std::move(rbuf_);
    rbuf_.data.reset(new char[initial_read_buffer]);
    rbuf_.capacity = initial_read_buffer;
    rpos_ = rend_ = frame_end_ = 0;
    frame_ready_ = false;
    return out_buf;
}

void Worker::arm(std::chrono::milliseconds limit)
{
    ++generation_;
    if (limit.count() <= 0) {
        deadline_.cancel();
        return;
    }
    deadline_.expires_after(limit);
    deadline_.async_wait([weak = weak_from_this(), generation = generation_](error_code ec) {
        auto self = weak.lock();
        // A handler of an earlier generation may run after disarm() (the timer had fired already): it must
        // not touch the exchange that came next.
        if (ec || !self || self->generation_ != generation)
            return;
        self->fail(ChannelError::timed_out,
                   "no answer within " + std::to_string(self->deadline_limit_.count()) + " ms");
    });
    deadline_limit_ = limit;
}

void Worker::disarm()
{
    ++generation_;
    deadline_.cancel();
}

void Worker::expire(std::string why)
{
    fail(ChannelError::timed_out, std::move(why));
}

awaitable<bool> Worker::write_all(const std::string &bytes)
{
    std::array<asio::const_buffer, 1> b{asio::buffer(bytes)};
    co_return !co_await write_all_fast(in, b);
}

void Worker::signal(int sig) const
{
    if (exited || pid <= 0)
        return;
    if (::kill(-pid, sig) != 0)
        ::kill(pid, sig);
}

void Worker::kill_group() const
{
    if (pid > 0)
        ::kill(-pid, SIGKILL); // ESRCH when the group is empty: nothing to do
}

} // namespace ferry::pool
