// One client connection as HTTP sees it: deadlines, the write path with its progress timeout, files, close.
#include "transport.hpp"

#include "ferry/base/log.hpp"
#include "tls/tls_context.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>

namespace ferry::server::detail {

void Connections::expire_due(std::chrono::steady_clock::time_point now)
{
    wheel.advance(now, [](WheelEntry &e) {
        auto &c = static_cast<Conn &>(e);
        if (c.expire) {
            c.expire(c);
            return;
        }
        c.timed_out = true;
        c.stream->cancel();
    });
}

Transport::Transport(Connections &conns, StreamSocket socket, conf::Duration write_timeout)
    : conns_(conns), stream_(std::move(socket)), write_timeout_(write_timeout)
{
    conn_.stream = &stream_;
    registered_ = conns_.list.insert(conns_.list.end(), &conn_);
    remote_ = stream_.remote_address();
}

Transport::~Transport()
{
    if (registered_flag_) {
        conns_.wheel.remove(conn_);
        conns_.list.erase(registered_);
    }
    stream_.close();
}

Stream Transport::take_stream()
{
    if (registered_flag_) {
        conns_.wheel.remove(conn_);
        conns_.list.erase(registered_);
        registered_flag_ = false;
    }
    return std::move(stream_);
}

// The common case, a write the socket takes at once, costs one writev and no wait (Boost 1.81 has no
// immediate completion: an Asio write would post its completion and cost a scheduler round).
awaitable<bool> Transport::write(std::span<const asio::const_buffer> bufs, bool more)
{
    std::array<iovec, 4> iov;
    assert(bufs.size() <= iov.size()); // "at most 4" (transport.hpp): more would be dropped
    const std::size_t n = std::min(bufs.size(), iov.size());
    for (std::size_t i = 0; i < n; ++i) {
        iov[i].iov_base = const_cast<void *>(bufs[i].data());
        iov[i].iov_len = bufs[i].size();
    }
    std::size_t first = 0;
    bool ok = false;
    for (;;) {
        Io r = stream_.write(std::span<const iovec>(iov.data() + first, n - first), more);
        if (r.status == Io::failed)
            break;
        if (r.status == Io::done) {
            sent_ += r.n;
            std::size_t done = r.n;
            while (first < n && done >= iov[first].iov_len)
                done -= iov[first++].iov_len;
            if (first == n) {
                ok = true;
                break;
            }
            iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + done;
            iov[first].iov_len -= done;
            r.status = Io::wait_write; // a partial write: the socket's buffer is full
        }
        arm(write_timeout_);
        auto [ec] = co_await stream_.async_wait(r.status, nothrow);
        if (ec) {
            if (conn_.timed_out)
                log_write_timeout();
            break;
        }
    }
    disarm(); // as every write ends: the caller arms its next read's deadline
    co_return ok;
}

awaitable<bool> Transport::handshake(TlsContext &tls)
{
    const std::string &who = remote_.empty() ? std::string("a client") : remote_;
    if (!tls.begin_handshake()) {
        log::debug("tls", who + ": " + std::to_string(tls.config().max_handshakes) +
                              " TLS handshakes in progress (http.ssl.max_handshakes): closing");
        co_return false;
    }
    struct End {
        TlsContext &t;
        ~End() { t.end_handshake(); }
    } end{tls};
    if (!stream_.start_tls(tls.new_ssl())) {
        log::error("tls", who + ": cannot create a TLS session (out of memory)");
        co_return false;
    }
    arm(tls.config().handshake_timeout);
    for (;;) {
        const Io r = stream_.handshake();
        if (r.status == Io::done)
            break;
        if (!r.blocked()) {
            tls.failed.fetch_add(1, std::memory_order_relaxed);
            log::debug("tls",
                       who + ": TLS handshake failed (" +
                           (r.status == Io::eof ? std::string("the client closed") : std::strerror(r.error)) +
                           ")");
            co_return false;
        }
        auto [ec] = co_await stream_.async_wait(r.status, nothrow);
        if (ec) {
            tls.failed.fetch_add(1, std::memory_order_relaxed);
            if (conn_.timed_out)
                log::debug("tls", who + ": no TLS handshake within " +
                                      std::to_string(tls.config().handshake_timeout.count()) +
                                      " ms (http.ssl.handshake_timeout): closing");
            co_return false;
        }
    }
    disarm();
    tls.done.fetch_add(1, std::memory_order_relaxed);
    co_return true;
}

void Transport::log_write_timeout() const
{
    log::info("http", (remote_.empty() ? std::string("a client") : remote_) + ": no progress writing for " +
                          std::to_string(write_timeout_.count()) +
                          " ms (http.timeouts.write): closing the connection after " + std::to_string(sent_) +
                          " bytes");
}

awaitable<bool> Transport::flush(std::string &out, bool more)
{
    if (out.empty())
        co_return true;
    std::array<asio::const_buffer, 1> b{asio::buffer(out)};
    const bool ok = co_await write(b, more);
    out.clear();
    if (out.capacity() > 1024 * 1024)
        std::string().swap(out);
    co_return ok;
}

awaitable<Transport::Sent> Transport::send_file(int fd, std::uint64_t offset, std::uint64_t count)
{
    constexpr std::uint64_t per_call = 1024 * 1024; // bounds the time one call may spend reading the file
    constexpr std::uint64_t fair_share = 4 * 1024 * 1024;
    std::uint64_t since_yield = 0;
    auto off = static_cast<off_t>(offset);
    // A large body goes out in full segments, the head with its first bytes (TCP_CORK, as nginx's
    // tcp_nopush): measured on 1 MiB files, p99 36 → 29 ms. Small bodies need no cork (MSG_MORE on the
    // head is enough) and would pay two more system calls.
    const bool corked = count >= 256 * 1024;
    if (corked)
        stream_.set_cork(true);
    while (count > 0) {
        Io r = stream_.send_file(fd, off, static_cast<std::size_t>(std::min(count, per_call)));
        if (r.status == Io::done) {
            if (r.n == 0)
                co_return Sent::file_short; // the connection closes: whatever is corked does not matter
            sent_ += r.n;
            count -= r.n;
            since_yield += r.n;
            if (since_yield >= fair_share && count > 0) {
                since_yield = 0;
                co_await asio::post(stream_.get_executor(), asio::use_awaitable);
            }
            continue;
        }
        if (r.status == Io::failed || r.status == Io::eof)
            co_return Sent::client_gone;
        since_yield = 0;
        arm(write_timeout_);
        auto [ec] = co_await stream_.async_wait(r.status, nothrow);
        disarm();
        if (ec && conn_.timed_out)
            log_write_timeout();
        if (ec)
            co_return Sent::client_gone;
    }
    if (corked)
        stream_.set_cork(false); // sends the last partial segment now
    co_return Sent::all;
}

awaitable<void> Transport::shut_down(bool linger, std::span<char> scratch)
{
    if (!stream_.shutdown_send() || !linger)
        co_return;
    arm(std::chrono::seconds(2));
    std::size_t drained = 0;
    while (drained < 4 * 1024 * 1024) {
        auto [rec, n] = co_await read_some(scratch);
        if (rec)
            break;
        drained += n;
    }
    disarm();
}

} // namespace ferry::server::detail
