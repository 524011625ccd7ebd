// The event loops (http.io_threads, each on its own thread), connection timeouts, signals and graceful
// shutdown (docs/architecture.md, "Several loops"); the listeners and acceptors are in accept.cpp.
#include "ferry/server/server.hpp"

#include "broker/redis_broker.hpp"
#include "control/control.hpp"
#include "control/limit_metrics.hpp"
#include "control/metrics.hpp"
#include "control/status.hpp"
#include "descriptors.hpp"
#include "ferry/base/log.hpp"
#include "ferry/base/loops.hpp"
#include "forms/upload_files.hpp"
#include "handlers/handler.hpp"
#include "handlers/php.hpp"
#include "handlers/request_body.hpp"
#include "handlers/websocket.hpp"
#include "loop.hpp"
#include "loop_threads.hpp"
#include "memory.hpp"
#include "pool_options.hpp"
#include "runtime.hpp"
#include "shared_state.hpp"
#include "static/static_handler.hpp"
#include "tls/tls_context.hpp"
#include "worker_script.hpp"
#include "ws/connection.hpp"
#include "ws/hub.hpp"
#include "ws/rpc.hpp"

#include <boost/asio/signal_set.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <sys/socket.h>
#include <system_error>
#include <unistd.h>
#include <utility>

namespace ferry::server {
namespace {

using detail::Conn;
using detail::LoopRuntime;
using detail::Runtime;
using detail::SharedState;
using detail::steady;
using detail::tcp;

// One coarse timer per loop enforces its connections' deadlines (idle, header, body, write timeouts) through
// the timer wheel: each tick looks only at the connections whose slot came due.
awaitable<void> tick(LoopRuntime *lr)
{
    auto &wheel = lr->state.connections.wheel;
    unsigned ticks = 0;
    while (!lr->stopping) {
        lr->ticker.expires_after(wheel.tick());
        co_await lr->ticker.async_wait(nothrow);
        log::pump();
        if (lr->files)
            lr->files->sweep(steady::now()); // cached files unused for a few seconds close
        if (++ticks % 4 == 0 && lr->state.loop == 0)
            detail::return_free_memory(); // malloc_trim covers every thread's arena
        if (ticks % 8 == 0 && lr->state.loop == 0 && lr->state.https_site.tls)
            lr->state.https_site.tls->reload_if_changed(); // a renewed certificate
        lr->state.connections.expire_due(steady::now());
    }
}

// On each loop, when the workers are ready: the ticker, and the loop's own acceptor (reuseport).
awaitable<bool> start_loop(LoopRuntime *lr, std::string default_host)
{
    lr->state.default_host = std::move(default_host);
    asio::co_spawn(lr->io, tick(lr), log_exceptions{"ticker"});
    if (lr->acceptor)
        asio::co_spawn(lr->io, detail::accept_own(lr), log_exceptions{"accept"});
    co_return true;
}

// On each loop, at a stop: no new connection or request; waits for the requests in flight, up to `deadline`.
// Gives the number of connections still busy then.
awaitable<unsigned> drain_loop(LoopRuntime *lr, steady::time_point deadline)
{
    error_code ignored;
    if (lr->acceptor)
        lr->acceptor->close(ignored);
    lr->state.draining = true;
    for (Conn *c : lr->state.connections.list)
        if (c->idle)
            c->stream->cancel();
    if (lr->ws)
        lr->ws->drain(); // WebSockets say goodbye (1001) and end when their clients answer
    co_await lr->state.sessions.join(deadline);
    co_return static_cast<unsigned>(lr->state.sessions.size());
}

// On each loop: closes every connection (at the end of a stop, or at once at a second signal).
void close_connections(LoopRuntime *lr)
{
    for (Conn *c : lr->state.connections.list)
        c->stream->close();
    if (lr->ws)
        lr->ws->close_all();
}

// On each loop, once the workers are stopped: closes what is left, ends the ticker and waits for the
// sessions to end.
awaitable<unsigned> close_loop(LoopRuntime *lr)
{
    close_connections(lr);
    lr->stopping = true;
    lr->ticker.cancel();
    co_await lr->state.sessions.join(steady::now() + std::chrono::seconds(1));
    co_return static_cast<unsigned>(lr->state.sessions.size());
}

// The server is done: each loop returns once every task on it has ended (LoopThreads).
void finish_loops(Runtime *rt)
{
    rt->threads->finish(std::chrono::seconds(3));
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
    // What the stop waits for ends now: the workers are killed (their requests fail), every connection is
    // closed; the stop then goes on as a graceful one would, and takes no time.
    for (const auto &e : rt->pools.all())
        e.pool->kill_all("second signal");
    for (auto &l : rt->loops)
        asio::post(l->io, [lr = l.get()] { close_connections(lr); });
}

awaitable<void> lifecycle(Runtime *rt)
{
    auto &cfg = rt->loops[0]->state.config;
    error_code ignored;
    asio::co_spawn(rt->io, watch_signals(rt), log_exceptions{"signals"});
    auto started = co_await rt->pool.start();
    if (started && rt->ws_pool && !rt->stop_requested) {
        if (auto ws = co_await rt->ws_pool->start(); !ws && rt->ws_pool->serving_workers() == 0) {
            log::error("pool", "cannot start the websockets workers: " + ws.error().message);
            rt->exit_code = 1;
            co_await rt->ws_pool->shutdown();
            co_await rt->pool.shutdown();
            finish_loops(rt);
            co_return;
        }
    }
    if (rt->stop_requested) {
        if (rt->ws_pool)
            co_await rt->ws_pool->shutdown();
        co_await rt->pool.shutdown();
        rt->signals.cancel(ignored);
        log::info("core", "stopped");
        finish_loops(rt);
        co_return;
    }
    if (!started && rt->pool.serving_workers() == 0) {
        log::error("pool", "cannot start workers: " + started.error().message);
        rt->exit_code = 1;
        if (rt->ws_pool)
            co_await rt->ws_pool->shutdown();
        co_await rt->pool.shutdown();
        finish_loops(rt);
        co_return;
    }
    const bool handoff = rt->acceptor.is_open();
    auto ep = handoff ? rt->acceptor.local_endpoint() : rt->loops[0]->acceptor->local_endpoint();
    std::string shown =
        ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
    std::string host = shown + ":" + std::to_string(ep.port());
    if (rt->broker)
        rt->broker->start();
    co_await on_each<bool>(rt->executors(),
                           [rt, &host](std::size_t i) { return start_loop(rt->loops[i].get(), host); });
    // The watcher and the RPC listener are up before the server says it is ready: a change saved right after
    // "listening on" is seen.
    if (auto control = rt->control->start(rt->pools); !control)
        log::error("core", control.error().message + "; the server runs without it");
    if (rt->status)
        rt->status->run(rt->pools, &rt->stop_requested);
    if (rt->metrics) {
        std::vector<const detail::HttpStats *> stats;
        for (auto &l : rt->loops)
            stats.push_back(&l->state.http_stats);
        rt->metrics->run(std::move(stats), rt->pools, rt->ws_budgets);
    }
    // The log line first: whoever waits for the stdout line (scripts, the tests) finds it logged already.
    log::info("http", "listening on http://" + host + " with " + std::to_string(cfg.http.pool.num_workers) +
                          " worker(s) and " + std::to_string(rt->loops.size()) + " event loop(s)" +
                          (rt->loops.size() > 1
                               ? std::string(", accept: ") +
                                     (cfg.http.accept == conf::Accept::reuseport ? "reuseport" : "handoff")
                               : ""));
    if (rt->tls) { // first: whoever waits for the http:// line finds this one before it
        auto tls_ep = rt->tls_acceptor.local_endpoint();
        log::info("http", "listening on https://" + tls_ep.address().to_string() + ":" +
                              std::to_string(tls_ep.port()) +
                              (cfg.http.ssl.redirect ? " (http:// redirects)" : ""));
        std::printf("listening on https://%s:%u\n", tls_ep.address().to_string().c_str(),
                    static_cast<unsigned>(tls_ep.port()));
        asio::co_spawn(rt->io, detail::accept_handoff(rt, &rt->tls_acceptor, true), log_exceptions{"accept"});
    }
    std::printf("listening on http://%s:%u\n", shown.c_str(), static_cast<unsigned>(ep.port()));
    std::fflush(stdout);
    if (handoff)
        asio::co_spawn(rt->io, detail::accept_handoff(rt, &rt->acceptor, false), log_exceptions{"accept"});
    rt->serving = true;
    if (!rt->stop_requested) {
        rt->stop_event.expires_at(steady::time_point::max());
        co_await rt->stop_event.async_wait(nothrow);
    }
    // One budget for the whole stop: requests in flight finish and workers stop within destroy_timeout;
    // what is left then is killed, so a stop takes at most destroy_timeout + ~2 s.
    auto deadline = steady::now() + cfg.http.pool.destroy_timeout;
    rt->control->stop();
    rt->acceptor.close(ignored);
    rt->tls_acceptor.close(ignored);
    auto busy = co_await on_each<unsigned>(
        rt->executors(), [rt, deadline](std::size_t i) { return drain_loop(rt->loops[i].get(), deadline); });
    if (unsigned n = std::accumulate(busy.begin(), busy.end(), 0u); n > 0)
        log::warn("core",
                  std::to_string(n) + " connection(s) still busy at the stop deadline (destroy_timeout)");
    if (rt->ws_pool)
        co_await rt->ws_pool->shutdown(deadline);
    co_await rt->pool.shutdown(deadline);
    if (rt->status)
        rt->status->stop(); // /health answered until the workers were stopped, /ready said no since the stop
    if (rt->metrics)
        rt->metrics->stop();
    const auto soon = steady::now() + std::chrono::seconds(1); // the control plane's sessions, closed
    co_await rt->control->join(soon);
    for (detail::ProbeServer *l :
         {rt->status ? &rt->status->listener() : nullptr, rt->metrics ? &rt->metrics->listener() : nullptr})
        if (l)
            co_await l->join(soon);
    co_await on_each<unsigned>(rt->executors(),
                               [rt](std::size_t i) { return close_loop(rt->loops[i].get()); });
    if (rt->broker)
        co_await rt->broker->stop();
    rt->signals.cancel(ignored);
    log::info("core", "stopped");
    finish_loops(rt);
}

} // namespace

int run(const conf::Config &cfg)
{
    if (const std::optional<std::string> bad = detail::check_worker_script(cfg.server.command)) {
        log::error("core", *bad);
        return 1;
    }
    detail::configure_allocator();
    const pool::DescriptorLimit fds = detail::prepare_descriptor_limit(); // before any worker starts
    const std::uint64_t fd_limit = fds.soft;
    const unsigned n_loops = std::max(1u, cfg.http.io_threads);
    std::vector<std::unique_ptr<detail::Loop>> loops;
    std::vector<asio::io_context *> contexts;
    for (unsigned i = 0; i < n_loops; ++i) {
        loops.push_back(std::make_unique<detail::Loop>());
        contexts.push_back(loops.back().get());
    }

    // What the process has once (its children, its CPUs, its temporary directory), shared by both pools.
    const auto host = std::make_shared<pool::Host>();
    host->set_worker_descriptor_limit(pool::worker_limit(fds));
    pool::Options popt;
    popt.command = cfg.server.command;
    for (const auto &[k, v] : cfg.server.env)
        popt.env.push_back(k + "=" + v);
    detail::apply_pool_config(popt, cfg.http.pool);
    Budget budget(cfg.http.max_body_memory);
    Budget head_budget(cfg.http.max_head_memory); // http.limits.max_head_memory (0: not used)
    // What the server counts beyond any one loop (control/counters.hpp), and the budgets /metrics shows.
    detail::ServerCounters counters;
    counters.limits.body_budget = &budget;
    counters.limits.head_budget = cfg.http.max_head_memory > 0 ? &head_budget : nullptr;
    popt.budget = &budget;
    popt.pins_loops = true; // the front end's loops go beside the HTTP workers (when pinned)
    // The control plane binds rpc.listen before the workers start: they get its address (RR_RPC).
    Runtime *runtime = nullptr;
    detail::Control control(*loops[0], cfg, counters.control, [&runtime] {
        if (runtime && !runtime->stop_requested) {
            log::info("core", "stop asked over RPC: finishing requests in flight");
            runtime->stop_requested = true;
            runtime->stop_event.cancel();
        }
    });
    std::unique_ptr<detail::TlsContext> tls; // http.ssl: its certificates read again at every reset
    if (cfg.http.ssl.enabled) {
        auto made = detail::TlsContext::create(cfg.http.ssl);
        if (!made) {
            log::error("core", made.error().message);
            return 1;
        }
        tls = std::move(*made);
        counters.limits.tls = tls.get();
        control.on_reset([t = tls.get()](std::string_view why) { t->reload_logged(why); });
    }
    // websockets: the cross-loop delivery of its topics, which RPC publishes go through too.
    detail::Broadcast<detail::ws::Delivery> ws_broadcast;
    detail::ws::LocalPublisher local_publisher(ws_broadcast);
    // websockets.broker: redis — the same publishes, shared with the other nodes (broker/redis_broker.hpp).
    auto broker = detail::broker::RedisBroker::configured(loops[0]->get_executor(), ws_broadcast,
                                                          cfg.websockets, counters.broker);
    detail::ws::Publisher *ws_publisher =
        broker ? static_cast<detail::ws::Publisher *>(broker.get()) : &local_publisher;
    // websockets: the server-wide memory budgets, shared by every loop (they outlive the connections).
    detail::ws::WsBudgets ws_budgets(cfg.websockets);
    if (cfg.websockets.enabled)
        detail::ws::warn_unreceivable(cfg.websockets);
    if (cfg.websockets.enabled)
        control.set_rpc_extension([ws_publisher, sse = !cfg.websockets.sse_path.empty()](
                                      std::string_view method, std::string_view arg) {
            return detail::ws::rpc_call(*ws_publisher, method, arg, sse);
        });
    if (auto bound = control.bind(); !bound) {
        log::error("core", bound.error().message);
        return 1;
    }
    if (auto a = control.rpc_address(); !a.empty())
        popt.env.push_back("RR_RPC=" + a);
    pool::Pool pool(host, contexts, popt);

    // websockets: a pool of its own (RR_MODE=websockets).
    std::unique_ptr<pool::Pool> ws_pool;
    if (const auto &w = cfg.websockets; w.enabled) {
        pool::Options wopt = popt;
        wopt.mode = "websockets";
        wopt.pins_loops = false;
        detail::apply_pool_config(wopt, w.pool);
        ws_pool = std::make_unique<pool::Pool>(host, contexts, wopt);
    }

    // Static files: the directory and the MIME table are checked before anything starts.
    std::unique_ptr<detail::MimeTypes> mime;
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
        log::info("static", "serving files from \"" + st.dir + "\" before PHP (" +
                                std::to_string(mime->size()) + " file types known)");
    }

    const std::string temp_dir = cfg.http.uploads_dir.empty() ? host->tmp_dir() : cfg.http.uploads_dir;
    if (int fd = detail::open_temp_file(temp_dir); fd >= 0) {
        ::close(fd);
    } else {
        log::error("core", "http.uploads.dir: cannot create temp files in \"" + temp_dir +
                               "\": " + std::strerror(errno) + " (large request bodies go there)");
        return 1;
    }
    // Upload files that a server killed with -9 left there are removed now (forms/upload_files.hpp).
    detail::UploadsDir uploads_dir;
    detail::StaleUploads stale;
    if (!uploads_dir.claim(temp_dir, stale)) {
        log::error("core", "http.uploads.dir: cannot create the uploads lock file in \"" + temp_dir +
                               "\": " + std::strerror(errno));
        return 1;
    }
    if (stale.files > 0)
        log::warn("core", "uploads: " + detail::describe(stale) + " (in \"" + temp_dir + "\")");
    counters.limits.uploads_dir = temp_dir; // ferry_upload_files counts this server's files there
    counters.limits.uploads_prefix = uploads_dir.prefix();
    std::vector<std::unique_ptr<LoopRuntime>> loop_rts;
    const std::size_t files_per_loop =
        mime ? detail::static_cache_capacity(fd_limit, n_loops, cfg.http.static_files.max_open_files) : 0;
    for (unsigned i = 0; i < n_loops; ++i) {
        std::unique_ptr<detail::StaticHandler> files;
        if (mime)
            files = std::make_unique<detail::StaticHandler>(
                cfg.http.static_files, root.fd, *mime, files_per_loop, &counters.descriptors,
                &cfg.http.compression,
                static_cast<std::size_t>(cfg.http.static_files.compress_cache / n_loops),
                &counters.compression);
        auto lr = std::make_unique<LoopRuntime>(*loops[i], i, cfg, pool, budget, counters, std::move(files),
                                                ws_pool.get(), ws_publisher, &ws_budgets);
        if (lr->ws)
            ws_broadcast.add_loop(
                loops[i]->get_executor(),
                [w = lr->ws.get()](const detail::ws::SharedDelivery &d) { w->hub.deliver(*d); });
        lr->state.temp_dir = temp_dir;
        lr->state.head_budget = cfg.http.max_head_memory > 0 ? &head_budget : nullptr;
        lr->state.upload_prefix = uploads_dir.prefix();
        lr->state.observe = cfg.metrics.enabled || cfg.http.access_logs;
        lr->state.limits.max_request_line = cfg.http.max_request_line;
        lr->state.limits.max_header_size = cfg.http.max_header_size;
        lr->state.limits.max_body_size = cfg.http.max_request_size;
        if (tls)
            lr->serve_tls(*tls, cfg.http.ssl.redirect);
        loop_rts.push_back(std::move(lr));
    }
    Runtime rt(loop_rts, pool, ws_pool.get());
    if (ws_pool)
        rt.ws_budgets = &ws_budgets;
    rt.control = &control;
    rt.broker = broker.get();
    auto &admin = loop_rts[0]->state; // the admin listeners' sessions are loop 0's connections
    auto probes = detail::shared_probe_listener(admin, cfg, counters.control); // null: one each
    std::optional<detail::StatusServer> status;
    if (cfg.status.enabled) {
        status.emplace(admin, cfg.status, counters.control, probes);
        if (broker)
            status->report_broker(&counters.broker);
        if (auto bound = status->bind(); !bound) {
            log::error("core", bound.error().message);
            return 1;
        }
        rt.status = &*status;
    }
    std::optional<detail::MetricsServer> metrics;
    if (cfg.metrics.enabled) {
        metrics.emplace(admin, cfg.metrics, counters, probes);
        if (auto bound = metrics->bind(); !bound) {
            log::error("core", bound.error().message);
            return 1;
        }
        rt.metrics = &*metrics;
    }
    if (auto rides = detail::rpc_rides(cfg); !rides.empty()) // rpc.listen on status' or metrics' address
        control.ride(rides == "status.address" ? status->listener() : metrics->listener());
    runtime = &rt;

    if (auto listening = detail::listen(rt, cfg); !listening) {
        log::error("core", listening.error().message);
        return 1;
    }
    if (tls) {
        rt.tls = tls.get();
        for (auto &l : loop_rts)
            if (l->redirect_handler)
                l->redirect_handler->set_port(rt.tls_acceptor.local_endpoint().port());
    }

    // Loops 1..n run on their own threads from now on (idle until the workers are ready); loop 0 on this one.
    // Each returns once every task on it has ended: the owners cancel and join what they started.
    std::vector<detail::Loop *> loop_ptrs;
    for (auto &l : loops)
        loop_ptrs.push_back(l.get());
    detail::LoopThreads threads(std::move(loop_ptrs));
    rt.threads = &threads;
    threads.start();
    asio::co_spawn(*loops[0], lifecycle(&rt), log_exceptions{"lifecycle"});
    if (threads.run() > 0) {
        // A task that did not end (logged): what is left is destroyed while rt and pool, which the frames
        // refer to, still exist; a frame destroyed on one loop can post another loop's, a round per loop
        // more reaches every chain, and the workers' channels let their waiters go.
        pool.abandon();
        if (ws_pool)
            ws_pool->abandon();
        for (unsigned round = 0; round <= n_loops; ++round)
            for (auto &l : loops)
                l->destroy_handlers();
    }
    return rt.exit_code;
}

} // namespace ferry::server
