// Accepting connections: one listening socket whose connections loop 0 hands to the least loaded loop
// (http.accept: handoff), or one SO_REUSEPORT socket per loop (reuseport); a failed accept backs off.
#include "descriptors.hpp"
#include "ferry/base/log.hpp"
#include "listener.hpp"
#include "runtime.hpp"

#include <cerrno>
#include <chrono>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace ferry::server::detail {
namespace {

// After a failed accept (EMFILE and friends): back off instead of spinning, 100 ms as Go's net/http does; the
// pending connections wait in the listen backlog meanwhile. Logged once per burst. False when the acceptor
// closed.
awaitable<bool> accept_failed(tcp::acceptor &acceptor, const error_code &ec, DescriptorRefusals &refusals)
{
    if (ec == asio::error::operation_aborted || !acceptor.is_open())
        co_return false;
    if (ec == asio::error::no_descriptors || ec.value() == ENFILE) {
        refusals.exhausted(FdUser::accept, ec.value());
    } else {
        thread_local steady::time_point last_logged{};
        if (const auto now = steady::now(); now - last_logged >= std::chrono::seconds(10)) {
            last_logged = now;
            log::error("http",
                       "accept failed: " + ec.message() + " (retrying every 100 ms; logged every 10 s)");
        }
    }
    asio::steady_timer t(acceptor.get_executor());
    t.expires_after(std::chrono::milliseconds(100));
    co_await t.async_wait(nothrow);
    co_return true;
}

// An accepted connection's descriptor on its way to its loop: closed if it never gets there (the loop
// stopped).
struct AcceptedFd {
    explicit AcceptedFd(int f) : fd(f) {}
    AcceptedFd(AcceptedFd &&o) noexcept : fd(std::exchange(o.fd, -1)) {}
    AcceptedFd &operator=(AcceptedFd &&) = delete;
    ~AcceptedFd()
    {
        if (fd >= 0)
            ::close(fd);
    }
    int release() { return std::exchange(fd, -1); }
    int fd;
};

// On the target loop's thread: the socket is registered with that loop's reactor there (a reactor is touched
// by its own thread only), and its session starts.
void adopt(LoopRuntime *lr, tcp protocol, AcceptedFd accepted, bool tls)
{
    StreamSocket sock(lr->io);
    error_code ec;
    sock.assign(protocol, accepted.fd, ec);
    if (ec) {
        lr->connections.fetch_sub(1, std::memory_order_relaxed);
        log::error("http", "cannot register an accepted connection: " + ec.message());
        return; // `accepted` closes it
    }
    accepted.release();
    asio::co_spawn(lr->io, run_session(lr, std::move(sock), tls), log_exceptions{"session"});
}

Result<void> listen_plain(Runtime &rt, const conf::Config &cfg);

} // namespace

awaitable<void> run_session(LoopRuntime *lr, StreamSocket sock, bool tls)
{
    auto hold = lr->state.sessions.enter_anyway(); // accepted before a stop closed the acceptor: it runs
    try {
        co_await http_session(lr->state, std::move(sock), tls ? lr->state.https_site : lr->state.http_site,
                              nullptr);
    } catch (const std::exception &e) {
        log::error("http", std::string("session ended by an exception: ") + e.what());
    }
    lr->connections.fetch_sub(1, std::memory_order_relaxed);
}

// http.accept: handoff. On loop 0: connections are accepted with accept4() when the listening socket is
// readable (up to a batch per wake-up) and each is posted to the loop with the fewest connections, where it
// stays.
awaitable<void> accept_handoff(Runtime *rt, tcp::acceptor *acceptor, bool tls)
{
    constexpr int batch = 64; // then the other work of loop 0 gets its turn
    const tcp protocol = acceptor->local_endpoint().protocol();
    const int listen_fd = acceptor->native_handle();
    for (;;) {
        auto [ec] = co_await acceptor->async_wait(tcp::acceptor::wait_read, nothrow);
        for (int i = 0; !ec && i < batch; ++i) {
            int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED)
                    continue;
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    ec = error_code(errno, asio::error::get_system_category());
                break;
            }
            LoopRuntime &target = rt->least_loaded();
            target.connections.fetch_add(1, std::memory_order_relaxed);
            if (&target.io == &rt->io) // this loop's own
                adopt(&target, protocol, AcceptedFd(fd), tls);
            else
                asio::post(target.io, [lr = &target, protocol, accepted = AcceptedFd(fd), tls]() mutable {
                    adopt(lr, protocol, std::move(accepted), tls);
                });
        }
        if (ec && !co_await accept_failed(*acceptor, ec, rt->loops[0]->state.counters.descriptors))
            co_return;
    }
}

// http.accept: reuseport. On each loop: its own listening socket.
awaitable<void> accept_own(LoopRuntime *lr)
{
    for (;;) {
        auto [ec, sock] = co_await lr->acceptor->async_accept(lr->io, nothrow);
        if (ec) {
            if (!co_await accept_failed(*lr->acceptor, ec, lr->state.counters.descriptors))
                co_return;
            continue;
        }
        lr->connections.fetch_add(1, std::memory_order_relaxed);
        asio::co_spawn(lr->io, run_session(lr, std::move(sock)), log_exceptions{"session"});
    }
}

// http.address: one socket (handoff), or one SO_REUSEPORT socket per loop. SO_REUSEPORT would let a
// second server on the same port silently share it: a plain bind first proves the port is free (it fails
// against any socket bound there, ours included), so a second `ferry serve` still fails loudly.
Result<void> listen(Runtime &rt, const conf::Config &cfg)
{
    if (auto plain = listen_plain(rt, cfg); !plain)
        return fail("http.address: cannot listen on " + cfg.http.address.to_string() + ": " +
                    plain.error().message);
    if (!cfg.http.ssl.enabled)
        return {};
    Result<void> opened;
    if (auto ep = listen_endpoint(rt.io, cfg.http.ssl.address); !ep)
        opened = ep.error();
    else
        opened = open_listener(rt.tls_acceptor, *ep, false, true, true);
    if (!opened)
        return fail("http.ssl.address: cannot listen on " + cfg.http.ssl.address.to_string() + ": " +
                    opened.error().message);
    return {};
}

namespace {

Result<void> listen_plain(Runtime &rt, const conf::Config &cfg)
{
    auto ep = listen_endpoint(rt.io, cfg.http.address);
    if (!ep)
        return ep.error();
    if (cfg.http.accept != conf::Accept::reuseport || rt.loops.size() == 1)
        return open_listener(rt.acceptor, *ep, false, true, true);
    if (ep->port() != 0) {
        tcp::acceptor probe(rt.io);
        if (auto free = open_listener(probe, *ep, false, false); !free)
            return free;
    }
    for (auto &l : rt.loops) {
        l->acceptor.emplace(l->io);
        if (auto opened = open_listener(*l->acceptor, *ep, true); !opened)
            return opened;
        error_code ec;
        *ep = l->acceptor->local_endpoint(ec); // port 0: the others join the port the first one got
        if (ec)
            return fail(ec.message());
    }
    return {};
}

} // namespace

} // namespace ferry::server::detail
