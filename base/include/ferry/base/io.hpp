// Asio conventions shared by pool/ and server/ (docs/architecture.md, "Concurrency"): one io_context,
// coroutines everywhere.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <span>
#include <sys/uio.h>

namespace ferry {
namespace asio = boost::asio;
using error_code = boost::system::error_code;
template <typename T = void> using awaitable = asio::awaitable<T>;
// Throwing token: any error aborts the coroutine.
inline constexpr auto use_awaitable = asio::use_awaitable;
// Non-throwing token: for expected outcomes (EOF, timeout, worker death); yields std::tuple<error_code, ...>.
inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// Writes all of `buffers` (at most 4) to a stream whose descriptor is non-blocking. It first tries one
// writev(2) on the native handle: a write that completes at once, the common case, then costs no posted
// completion and no extra epoll_wait(0) round of the scheduler (Boost 1.81 has no immediate completion).
// Whatever is left goes through async_write_some, and `before_wait()` runs before each wait for the stream
// to drain (the caller arms a deadline there: a write times out on lack of progress, not on its length).
template <typename Stream, typename BeforeWait>
awaitable<error_code> write_all_fast(Stream &stream, std::span<const asio::const_buffer> buffers,
                                     BeforeWait before_wait)
{
    std::array<asio::const_buffer, 4> bufs;
    std::array<iovec, 4> iov;
    std::size_t n = std::min(buffers.size(), bufs.size());
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        bufs[i] = buffers[i];
        iov[i].iov_base = const_cast<void *>(bufs[i].data());
        iov[i].iov_len = bufs[i].size();
        total += bufs[i].size();
    }
    ssize_t w;
    do {
        w = ::writev(stream.native_handle(), iov.data(), static_cast<int>(n));
    } while (w < 0 && errno == EINTR);
    if (w >= 0 && static_cast<std::size_t>(w) == total)
        co_return error_code{};
    if (w < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            co_return error_code(errno, boost::system::system_category());
        w = 0;
    }
    std::size_t done = static_cast<std::size_t>(w), first = 0;
    for (;;) {
        while (first < n && done >= bufs[first].size())
            done -= bufs[first++].size();
        if (first == n)
            co_return error_code{};
        bufs[first] += done;
        before_wait();
        auto [ec, written] =
            co_await stream.async_write_some(std::span(bufs.data() + first, n - first), nothrow);
        if (ec)
            co_return ec;
        done = written;
    }
}

// Not a coroutine itself: no extra frame per write.
template <typename Stream>
awaitable<error_code> write_all_fast(Stream &stream, std::span<const asio::const_buffer> buffers)
{
    return write_all_fast(stream, buffers, [] {});
}

// Completion handler for co_spawn that logs whatever escaped the coroutine.
struct log_exceptions {
    const char *what;
    void operator()(std::exception_ptr e) const;
};
} // namespace ferry
