// Listener, connection timeouts, signals and graceful shutdown.
#include "ferry/server/server.hpp"

#include "ferry/relay/log.hpp"
#include "handlers/handler.hpp"
#include "handlers/php.hpp"
#include "handlers/request_body.hpp"
#include "loop.hpp"
#include "memory.hpp"
#include "shared_state.hpp"
#include "static/static_handler.hpp"

#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace ferry::server {
namespace {

using detail::Conn;
using detail::SharedState;
using detail::steady;
using detail::tcp;
using detail::WheelEntry;

struct Runtime {
    // `files`: the static files handler, when http.static is on; it comes before PHP.
    Runtime(asio::io_context &io_, const conf::Config &c, pool::Pool &p, pool::Budget &b,
            detail::StaticHandler *files)
        : io(io_), pool(p), state(io_, c, b, router), php(state, p), acceptor(io_),
          signals(io_, SIGINT, SIGTERM), ticker(io_)
    {
        if (files)
            router.add(*files);
        router.add(php);
    }
    asio::io_context &io;
    pool::Pool &pool;
    detail::Router router;
    SharedState state;
    detail::PhpHandler php;
    tcp::acceptor acceptor;
    asio::signal_set signals;
    asio::steady_timer ticker;
    bool stopping = false;
    bool stop_requested = false;       // SIGTERM/SIGINT seen
    bool serving = false;              // workers started, accepting
    asio::steady_timer stop_event{io}; // cancelled when a stop is requested
    int exit_code = 0;
    unsigned sessions = 0;
    asio::steady_timer *sessions_waiter = nullptr; // cancelled when the last session ends
};

awaitable<void> run_session(Runtime *rt, tcp::socket sock)
{
    ++rt->sessions;
    try {
        co_await detail::http_session(rt->state, std::move(sock));
    } catch (const std::exception &e) {
        log::error("http", std::string("session ended by an exception: ") + e.what());
    }
    if (--rt->sessions == 0 && rt->sessions_waiter)
        rt->sessions_waiter->cancel();
}

awaitable<void> accept_loop(Runtime *rt)
{
    for (;;) {
        auto [ec, sock] = co_await rt->acceptor.async_accept(nothrow);
        if (ec) {
            if (ec == asio::error::operation_aborted || !rt->acceptor.is_open())
                co_return;
            log::error("http", "accept failed: " + ec.message());
            // EMFILE and friends: back off instead of spinning.
            asio::steady_timer t(rt->io);
            t.expires_after(std::chrono::milliseconds(100));
            co_await t.async_wait(nothrow);
            continue;
        }
        asio::co_spawn(rt->io, run_session(rt, std::move(sock)), log_exceptions{"session"});
    }
}

// One coarse timer enforces every connection's deadline (idle, header, body, write timeouts) through the
// timer wheel: each tick looks only at the connections whose slot came due.
awaitable<void> tick(Runtime *rt)
{
    auto &wheel = rt->state.connections.wheel;
    unsigned ticks = 0;
    while (!rt->stopping) {
        rt->ticker.expires_after(wheel.tick());
        co_await rt->ticker.async_wait(nothrow);
        log::pump();
        if (++ticks % 4 == 0)
            detail::return_free_memory();
        wheel.advance(steady::now(), [](WheelEntry &e) {
            auto &c = static_cast<Conn &>(e);
            c.timed_out = true;
            error_code ec;
            c.socket->cancel(ec);
        });
    }
}

// Until every session has ended, or the deadline.
awaitable<void> sessions_ended(Runtime *rt, steady::time_point deadline)
{
    if (rt->sessions == 0)
        co_return;
    asio::steady_timer t(rt->io, deadline);
    rt->sessions_waiter = &t;
    co_await t.async_wait(nothrow);
    rt->sessions_waiter = nullptr;
}

// Signals are watched from the start: a SIGTERM while workers boot (up to allocate_timeout) stops too.
awaitable<void> watch_signals(Runtime *rt)
{
    auto [ec, sig] = co_await rt->signals.async_wait(nothrow);
    if (ec)
        co_return;
    log::info("core",
              std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                  (rt->serving ? ", stopping: finishing requests in flight" : " while starting, stopping"));
    rt->stop_requested = true;
    rt->stop_event.cancel();
    if (!rt->serving)
        asio::co_spawn(rt->io, rt->pool.shutdown(), log_exceptions{"pool shutdown"});
    auto [ec2, sig2] = co_await rt->signals.async_wait(nothrow);
    if (ec2)
        co_return;
    log::warn("core", "second signal: stopping now");
    rt->exit_code = 1;
    rt->pool.kill_all("second signal");
    error_code ignored;
    for (Conn *c : rt->state.connections.list)
        c->socket->close(ignored);
    rt->io.stop(); // run() returns; the handlers left are destroyed before the state they use
}

awaitable<void> lifecycle(Runtime *rt)
{
    auto &cfg = rt->state.config;
    asio::co_spawn(rt->io, watch_signals(rt), log_exceptions{"signals"});
    auto started = co_await rt->pool.start();
    if (rt->stop_requested) {
        co_await rt->pool.shutdown();
        rt->stopping = true;
        error_code ignored;
        rt->signals.cancel(ignored);
        log::info("core", "stopped");
        rt->io.stop();
        co_return;
    }
    if (!started && rt->pool.serving_workers() == 0) {
        log::error("pool", "cannot start workers: " + started.error().message);
        rt->exit_code = 1;
        rt->stopping = true;
        co_await rt->pool.shutdown();
        rt->io.stop();
        co_return;
    }
    auto ep = rt->acceptor.local_endpoint();
    std::string shown =
        ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
    rt->state.default_host = shown + ":" + std::to_string(ep.port());
    std::printf("listening on http://%s:%u\n", shown.c_str(), static_cast<unsigned>(ep.port()));
    std::fflush(stdout);
    log::info("http", "listening on http://" + rt->state.default_host + " with " +
                          std::to_string(cfg.http.pool.num_workers) + " worker(s)");
    asio::co_spawn(rt->io, accept_loop(rt), log_exceptions{"accept"});
    asio::co_spawn(rt->io, tick(rt), log_exceptions{"ticker"});

    rt->serving = true;
    if (!rt->stop_requested) {
        rt->stop_event.expires_at(steady::time_point::max());
        co_await rt->stop_event.async_wait(nothrow);
    }
    // One budget for the whole stop: requests in flight finish and workers stop within destroy_timeout;
    // what is left then is killed, so a stop takes at most destroy_timeout + ~2 s.
    auto deadline = steady::now() + cfg.http.pool.destroy_timeout;
    error_code ignored;
    rt->acceptor.close(ignored);
    rt->state.draining = true;
    for (Conn *c : rt->state.connections.list)
        if (c->idle)
            c->socket->cancel(ignored);
    co_await sessions_ended(rt, deadline);
    if (rt->sessions > 0)
        log::warn("core", std::to_string(rt->sessions) +
                              " connection(s) still busy at the stop deadline (destroy_timeout)");
    co_await rt->pool.shutdown(deadline);
    for (Conn *c : rt->state.connections.list)
        c->socket->close(ignored);
    rt->stopping = true;
    rt->ticker.cancel();
    rt->signals.cancel(ignored);
    co_await sessions_ended(rt, steady::now() + std::chrono::seconds(1));
    log::info("core", "stopped");
    rt->io.stop();
}

} // namespace

int run(const conf::Config &cfg)
{
    detail::configure_allocator();
    detail::Loop io;

    pool::Options popt;
    popt.command = cfg.server.command;
    for (const auto &[k, v] : cfg.server.env)
        popt.env.push_back(k + "=" + v);
    popt.num_workers = cfg.http.pool.num_workers;
    popt.max_jobs = cfg.http.pool.max_jobs;
    popt.allocate_timeout = cfg.http.pool.allocate_timeout;
    popt.destroy_timeout = cfg.http.pool.destroy_timeout;
    popt.boot_timeout = cfg.http.pool.allocate_timeout;
    popt.exec_ttl = cfg.http.pool.exec_ttl;
    popt.exec_warn = cfg.http.pool.exec_warn;
    pool::Budget budget(cfg.http.max_body_memory);
    popt.budget = &budget;
    pool::Pool pool(io, popt);

    // Static files: the directory and the MIME table are checked before anything starts.
    std::unique_ptr<detail::MimeTypes> mime;
    std::unique_ptr<detail::StaticHandler> files;
    struct RootFd {
        int fd = -1;
        ~RootFd()
        {
            if (fd >= 0)
                ::close(fd);
        }
    } root;
    if (const auto &st = cfg.http.static_files; st.enabled) {
        root.fd = detail::open_static_root(st.dir);
        if (root.fd < 0) {
            log::error("core", "http.static.dir: \"" + st.dir +
                                   "\" is not a directory Ferry can open: " + std::strerror(errno));
            return 1;
        }
        mime = std::make_unique<detail::MimeTypes>();
        if (!mime->loaded())
            log::warn("static", "cannot read /etc/mime.types (Debian package media-types): every file is "
                                "served as application/octet-stream");
        if (!st.request.empty())
            log::warn("static",
                      "http.static.request has no effect in Ferry: RoadRunner adds these headers to "
                      "the request of a static file, which no PHP code sees");
        files = std::make_unique<detail::StaticHandler>(st, root.fd, *mime);
        log::info("static", "serving files from \"" + st.dir + "\" before PHP (" +
                                std::to_string(mime->size()) + " file types known)");
    }
    for (const std::string &m : cfg.http.middleware)
        if (m != "static" && m != "proxy_ip_parser")
            log::warn("core", "http.middleware: \"" + m + "\" is not supported by Ferry and is ignored");

    Runtime rt(io, cfg, pool, budget, files.get());
    rt.state.temp_dir = cfg.http.uploads_dir;
    if (rt.state.temp_dir.empty()) {
        const char *t = std::getenv("TMPDIR");
        rt.state.temp_dir = t && *t ? t : "/tmp";
    }
    if (int fd = detail::open_temp_file(rt.state.temp_dir); fd >= 0) {
        ::close(fd);
    } else {
        log::error("core", "http.uploads.dir: cannot create temp files in \"" + rt.state.temp_dir +
                               "\": " + std::strerror(errno) + " (large request bodies go there)");
        return 1;
    }
    rt.state.limits.max_request_line = cfg.http.max_request_line;
    rt.state.limits.max_header_size = cfg.http.max_header_size;
    rt.state.limits.max_body_size = cfg.http.max_request_size;

    try {
        tcp::resolver resolver(io);
        auto results = resolver.resolve(cfg.http.address.host, std::to_string(cfg.http.address.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service);
        tcp::endpoint ep = *results.begin();
        rt.acceptor.open(ep.protocol());
        rt.acceptor.set_option(tcp::acceptor::reuse_address(true));
        rt.acceptor.bind(ep);
        rt.acceptor.listen(asio::socket_base::max_listen_connections);
    } catch (const std::exception &e) {
        log::error("core", "cannot listen on " + cfg.http.address.to_string() + ": " + e.what());
        return 1;
    }

    asio::co_spawn(io, lifecycle(&rt), log_exceptions{"lifecycle"});
    io.run();
    io.destroy_handlers(); // while rt and pool, which their frames refer to, still exist
    pool.abandon();        // requests suspended on a worker: Asio posts the destruction of their frames...
    io.destroy_handlers(); // ... which happens here, still before rt and pool go
    return rt.exit_code;
}

} // namespace ferry::server
