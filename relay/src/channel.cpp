#include "ferry/relay/channel.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <sys/ioctl.h>
#include <unistd.h>

namespace ferry::relay {

namespace {
constexpr std::size_t initial_read_buffer = 16 * 1024;
constexpr std::size_t keep_read_buffer_max = 1024 * 1024; // a larger one is dropped when an exchange ends

// Unexpected stdout bytes for a log line: a frame is shown with its flags and payload, anything else as is.
std::string describe_output(std::string_view bytes, std::uint32_t max_payload)
{
    FrameHeader h;
    auto r = decode_header(bytes, h, max_payload);
    std::string out = std::to_string(bytes.size()) + " byte(s): ";
    if (r.status != DecodeStatus::ok)
        return out + "\"" + printable(bytes, 160) + "\"";
    std::string_view payload = bytes.substr(std::min(bytes.size(), h.size()));
    return out + "a frame (flags " + std::to_string(h.flags) + ", " + std::to_string(h.payload_size) +
           "-byte payload \"" + printable(payload.substr(0, h.payload_size), 160) + "\")";
}
} // namespace

Channel::Channel(asio::io_context &io, std::uint32_t max_payload)
    : in_(io), out_(io), max_payload_(max_payload), deadline_(io)
{
    fresh_buffer();
}

Channel::~Channel() = default;

void Channel::fresh_buffer()
{
    rbuf_.data.reset(new char[initial_read_buffer]);
    rbuf_.capacity = initial_read_buffer;
}

void Channel::watch()
{
    if (reading_ || waiting_ || frame_ready_ || failure_ != ChannelError::none)
        return;
    waiting_ = true;
    // A readiness wait, not a read: no byte is taken from the pipe before a handler looks at it, so bytes
    // are never read while idle and handed to the request that began before the handler ran.
    out_.async_read_some(asio::null_buffers(),
                         [self = shared_from_this()](error_code ec, std::size_t) { self->on_readable(ec); });
}

void Channel::prepare_read()
{
    if (rend_ == rbuf_.capacity)
        ensure_capacity(rend_ - rpos_ + 1);
}

Channel::Parsed Channel::read_now()
{
    prepare_read();
    for (;;) {
        ssize_t n = ::read(out_.native_handle(), rbuf_.data.get() + rend_, rbuf_.capacity - rend_);
        if (n > 0)
            return absorb({}, static_cast<std::size_t>(n));
        if (n == 0)
            return absorb(asio::error::eof, 0);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return Parsed::need_more;
        return absorb(error_code(errno, boost::system::system_category()), 0);
    }
}

// The idle watch saw the pipe readable (or an exchange began meanwhile, and this is its reply).
void Channel::on_readable(error_code ec)
{
    waiting_ = false;
    if (failure_ != ChannelError::none || ec == asio::error::operation_aborted) {
        notify(); // a waiting exchange sees the failure, or reads on its own
        return;
    }
    Parsed p = ec ? absorb(ec, 0) : read_now();
    switch (p) {
    case Parsed::need_more:
        if (!expecting_)
            watch(); // nothing was there after all
        else
            notify(); // a waiting exchange goes on reading directly
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

bool Channel::claim()
{
    if (expecting_ || failure_ != ChannelError::none || reading_)
        return failure_ == ChannelError::none;
    // No request is written yet: whatever the pipe holds now arrived while none was in flight (a watched
    // idle worker whose watch has not run yet, or a worker handed straight from its last reply to this
    // request). One read, EAGAIN when the pipe is quiet.
    if (read_now() == Parsed::unexpected && on_unexpected)
        on_unexpected(error_);
    return failure_ == ChannelError::none;
}

bool Channel::request_unread()
{
    int queued = 0;
    return ::ioctl(in_.native_handle(), FIONREAD, &queued) == 0 && queued > 0;
}

Channel::Parsed Channel::absorb(error_code ec, std::size_t n)
{
    if (ec) {
        std::string_view avail(rbuf_.data.get() + rpos_, rend_ - rpos_);
        if (ec != asio::error::eof)
            set_failure(ChannelError::closed, "reading from the worker failed: " + ec.message());
        else if (avail.empty())
            set_failure(ChannelError::closed, "worker closed its stdout");
        else
            set_failure(ChannelError::closed, "worker closed its stdout in the middle of a frame after: \"" +
                                                  printable(avail) + "\"");
        return Parsed::failed;
    }
    rend_ += n;
    return parse();
}

Channel::Parsed Channel::parse()
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
    auto r = decode_header(avail, hdr_, max_payload_);
    if (r.status == DecodeStatus::error) {
        set_failure(ChannelError::not_a_frame, r.error);
        return Parsed::failed;
    }
    if (r.status == DecodeStatus::ok && avail.size() >= r.needed) {
        frame_end_ = rpos_ + r.needed;
        frame_ready_ = true;
        return Parsed::frame;
    }
    ensure_capacity(std::max(r.needed, avail.size() + 1));
    return Parsed::need_more;
}

void Channel::ensure_capacity(std::size_t needed)
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

void Channel::set_failure(ChannelError kind, std::string error)
{
    if (failure_ != ChannelError::none)
        return;
    failure_ = kind;
    error_ = std::move(error);
}

void Channel::break_off(ChannelError kind, std::string error)
{
    set_failure(kind, std::move(error));
    if (direct_read_) { // an exchange waits in its own read: end it
        error_code ignored;
        out_.cancel(ignored);
    }
    notify();
}

void Channel::notify()
{
    if (!waiter_)
        return;
    // Resumes the waiting exchange inline: we are on its io_context's thread, inside a completion handler.
    auto w = std::move(waiter_);
    w->resume();
}

void Channel::begin_exchange()
{
    expecting_ = true;
    first_frame_ = true;
}

awaitable<Result<Frame>> Channel::next_frame()
{
    while (!frame_ready_ && failure_ == ChannelError::none) {
        if (waiting_) {
            // The idle watch is outstanding: its handler reads this exchange's reply; wait for it.
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
        auto [ec, n] = co_await out_.async_read_some(
            asio::buffer(rbuf_.data.get() + rend_, rbuf_.capacity - rend_), nothrow);
        reading_ = direct_read_ = false;
        absorb(ec, n);
    }
    if (frame_ready_ && first_frame_) {
        first_frame_ = false;
        // The reply to a request can only come once the worker has read that request whole (docs/protocol.md
        // §2): a frame that arrives while the request's bytes are still in its stdin was written before the
        // worker read it, so it belongs to an earlier request (a late second answer). Nothing of this request
        // ran: the caller retires the worker and gives the request to another one.
        if (request_unread()) {
            std::string_view avail(rbuf_.data.get() + rpos_, rend_ - rpos_);
            set_failure(ChannelError::premature,
                        "on stdout before it had read the request (output of an earlier request) " +
                            describe_output(avail, max_payload_));
            frame_ready_ = false;
        }
    }
    if (frame_ready_)
        co_return Frame{hdr_, std::string_view(rbuf_.data.get() + rpos_ + hdr_.size(), hdr_.payload_size)};
    co_return ferry::fail(error_);
}

void Channel::consume_frame()
{
    frame_ready_ = false;
    rpos_ = frame_end_;
    if (rpos_ == rend_)
        rpos_ = rend_ = frame_end_ = 0;
    parse(); // a frame already buffered is ready for the next next_frame(); otherwise it reads then
}

Result<void> Channel::end_exchange(bool check_quiet)
{
    frame_ready_ = false;
    expecting_ = false;
    rpos_ = frame_end_;
    if (rpos_ < rend_) {
        std::string_view rest(rbuf_.data.get() + rpos_, rend_ - rpos_);
        failure_ = ChannelError::not_a_frame;
        error_ = "on stdout after its response " + describe_output(rest, max_payload_);
        return ferry::fail(error_);
    }
    rpos_ = rend_ = frame_end_ = 0;
    if (rbuf_.capacity > keep_read_buffer_max)
        fresh_buffer();
    // One read shows whether more is already there (EOF: it exited, which the reaper reports; the channel is
    // broken and claim() says so). Output that comes later is seen by the idle watch or by claim().
    if (check_quiet && read_now() == Parsed::unexpected) {
        error_ = "on stdout after its response " +
                 describe_output(std::string_view(rbuf_.data.get() + rpos_, rend_ - rpos_), max_payload_);
        return ferry::fail(error_);
    }
    return {};
}

FrameBuffer Channel::take_frame()
{
    FrameBuffer taken;
    if (!frame_ready_ || frame_end_ != rend_)
        return taken;
    taken = std::move(rbuf_);
    fresh_buffer();
    rpos_ = rend_ = frame_end_ = 0;
    frame_ready_ = false;
    return taken;
}

awaitable<Result<void>> Channel::send(const std::string &frame)
{
    std::array<asio::const_buffer, 1> b{asio::buffer(frame)};
    if (error_code ec = co_await write_all_fast(in_, b))
        co_return ferry::fail("writing to the worker failed: " + ec.message());
    co_return Result<void>{};
}

void Channel::arm(std::chrono::milliseconds limit)
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
        self->break_off(ChannelError::timed_out,
                        "no answer within " + std::to_string(self->deadline_limit_.count()) + " ms");
    });
    deadline_limit_ = limit;
}

void Channel::disarm()
{
    ++generation_;
    deadline_.cancel();
}

void Channel::expire(std::string why)
{
    break_off(ChannelError::timed_out, std::move(why));
}

} // namespace ferry::relay
