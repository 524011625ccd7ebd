#include "worker.hpp"

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <sys/wait.h>

namespace ferry::pool {

namespace {
constexpr std::size_t initial_read_buffer = 16 * 1024;
}

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

awaitable<bool> Worker::read_frame(relay::FrameHeader &h, std::string_view &payload, std::string &error,
                                   std::uint32_t max_payload)
{
    for (;;) {
        std::string_view avail(rbuf_.data() + rpos_, rend_ - rpos_);
        auto r = relay::decode_header(avail, h, max_payload);
        if (r.status == relay::DecodeStatus::error) {
            error = r.error;
            co_return false;
        }
        if (r.status == relay::DecodeStatus::ok && avail.size() >= r.needed) {
            payload = avail.substr(h.size(), h.payload_size);
            frame_end_ = rpos_ + r.needed;
            co_return true;
        }
        std::size_t needed = std::max(r.needed, avail.size() + 1);
        if (rpos_ > 0 && rpos_ + needed > rbuf_.size()) {
            std::memmove(rbuf_.data(), rbuf_.data() + rpos_, avail.size());
            rend_ = avail.size();
            rpos_ = 0;
        }
        if (needed > rbuf_.size())
            rbuf_.resize(std::max(needed, rbuf_.size() * 2));
        auto [ec, n] =
            co_await out.async_read_some(asio::buffer(rbuf_.data() + rend_, rbuf_.size() - rend_), nothrow);
        if (ec) {
            if (ec == asio::error::eof)
                error = avail.empty() ? "worker closed its stdout"
                                      : "worker closed its stdout in the middle of a frame after: \"" +
                                            relay::printable(avail) + "\"";
            else
                error = "reading from worker failed: " + ec.message();
            co_return false;
        }
        rend_ += n;
    }
}

void Worker::consume_frame()
{
    rpos_ = frame_end_;
    if (rpos_ == rend_) {
        rpos_ = rend_ = 0;
        if (rbuf_.size() > 1024 * 1024) {
            rbuf_.resize(initial_read_buffer);
            rbuf_.shrink_to_fit();
        }
    }
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

} // namespace ferry::pool
