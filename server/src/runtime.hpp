// The running server's state, loop by loop (LoopRuntime) and as a whole (Runtime), shared by the lifecycle
// (server.cpp) and the acceptors (accept.cpp). Internal to the server library.
#pragma once

#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"
#include "handlers/handler.hpp"
#include "handlers/php.hpp"
#include "handlers/redirect.hpp"
#include "handlers/websocket.hpp"
#include "loop.hpp"
#include "pools.hpp"
#include "shared_state.hpp"
#include "static/static_handler.hpp"
#include "ws/connection.hpp"

#include <boost/asio/signal_set.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

namespace ferry::server::detail {

class Control;
class StatusServer;
class MetricsServer;
class LoopThreads;
namespace broker {
class RedisBroker;
}

// One event loop's part of the server: its thread's io_context, connections, handlers, timeouts ticker and,
// with http.accept: reuseport, its own listening socket. Touched by its own thread only, but `connections`.
struct LoopRuntime {
    LoopRuntime(Loop &io_, unsigned index, const conf::Config &c, pool::Pool &p, Budget &b,
                ServerCounters &counters, std::unique_ptr<StaticHandler> static_files, pool::Pool *ws_pool,
                ws::Publisher *publisher, ws::WsBudgets *ws_budgets)
        : io(io_), state(io_, c, b, router, counters), files(std::move(static_files)), php(state, p),
          ticker(io_)
    {
        state.loop = index;
        if (ws_pool) {
            ws = std::make_unique<ws::WsLoop>(state, c.websockets, *ws_pool, *publisher, *ws_budgets);
            ws->hub.watch(publisher); // a broker subscribes the node to the topics its loops have
            if (!c.websockets.sse_path.empty())
                ws->hub.keep_history(static_cast<std::size_t>(c.websockets.sse_history),
                                     static_cast<std::size_t>(c.websockets.max_queue_bytes));
            ws_handler = std::make_unique<WebSocketHandler>(state, *ws);
            router.add(*ws_handler);
        }
        if (files)
            router.add(*files);
        router.add(php);
    }
    // http.ssl: the HTTPS listener's sessions use `tls` with the loop's handlers; with `redirect`, the plain
    // listener's answer 308 to HTTPS.
    void serve_tls(TlsContext &tls, bool redirect)
    {
        state.https_site = state.http_site;
        state.https_site.tls = &tls;
        if (!redirect)
            return;
        redirect_handler = std::make_unique<RedirectHandler>(state);
        redirect_router.add(*redirect_handler);
        state.http_site.router = &redirect_router;
    }
    Loop &io;
    Router router;
    SharedState state;
    std::unique_ptr<StaticHandler> files; // http.static: its file cache is this loop's
    PhpHandler php;
    std::unique_ptr<ws::WsLoop> ws; // websockets: this loop's connections and topics
    std::unique_ptr<WebSocketHandler> ws_handler;
    std::unique_ptr<RedirectHandler> redirect_handler; // http.ssl.redirect
    Router redirect_router;
    std::optional<tcp::acceptor> acceptor; // reuseport
    asio::steady_timer ticker;
    bool stopping = false;
    std::atomic<unsigned> connections{0}; // for the hand-off: raised by loop 0, lowered here
};

struct Runtime {
    Runtime(std::vector<std::unique_ptr<LoopRuntime>> &l, pool::Pool &p, pool::Pool *ws)
        : loops(l), io(l[0]->io), pool(p), ws_pool(ws), acceptor(io), tls_acceptor(io),
          signals(io, SIGINT, SIGTERM), stop_event(io)
    {
        pools.add("http", p);
        if (ws)
            pools.add("websockets", *ws);
    }
    std::vector<std::unique_ptr<LoopRuntime>> &loops;
    Loop &io; // loops[0]: signals, the pool's start and stop, the hand-off acceptor
    pool::Pool &pool;
    pool::Pool *ws_pool; // websockets workers (null: no websockets section)
    Pools pools;         // both by name, for control, status, metrics and RPC
    // Their server-wide memory budgets (null: no websockets section).
    const ws::WsBudgets *ws_budgets = nullptr;
    tcp::acceptor acceptor;     // handoff
    tcp::acceptor tls_acceptor; // http.ssl.address (always handed off from loop 0)
    TlsContext *tls = nullptr;  // http.ssl
    asio::signal_set signals;
    bool stop_requested = false;           // SIGTERM/SIGINT seen
    bool serving = false;                  // workers started, accepting
    asio::steady_timer stop_event;         // cancelled when a stop is requested
    Control *control = nullptr;            // resets (reload, SIGHUP, RPC), ferry.Stop
    broker::RedisBroker *broker = nullptr; // websockets.broker: redis
    StatusServer *status = nullptr;        // status.address: /health, /ready
    MetricsServer *metrics = nullptr;      // metrics.address: /metrics
    LoopThreads *threads = nullptr;        // the loops' threads: finish() once the server is done
    int exit_code = 0;
    unsigned next_loop = 0;

    std::vector<asio::any_io_executor> executors() const
    {
        std::vector<asio::any_io_executor> out;
        for (auto &l : loops)
            out.push_back(l->io.get_executor());
        return out;
    }
    // The loop a new connection goes to: the fewest connections, ties taken in turn.
    LoopRuntime &least_loaded()
    {
        const auto n = static_cast<unsigned>(loops.size());
        unsigned best = next_loop % n;
        unsigned fewest = loops[best]->connections.load(std::memory_order_relaxed);
        for (unsigned k = 1; k < n && fewest > 0; ++k) {
            unsigned i = (next_loop + k) % n;
            unsigned c = loops[i]->connections.load(std::memory_order_relaxed);
            if (c < fewest)
                best = i, fewest = c;
        }
        next_loop = best + 1;
        return *loops[best];
    }
};

// A connection's session on its loop, from accept to close (`tls`: accepted on http.ssl.address).
awaitable<void> run_session(LoopRuntime *lr, StreamSocket sock, bool tls = false);
// http.accept: handoff (on loop 0, from `acceptor` into the least loaded loop) and reuseport (each loop its
// own socket). http.ssl.address is always handed off.
awaitable<void> accept_handoff(Runtime *rt, tcp::acceptor *acceptor, bool tls);
awaitable<void> accept_own(LoopRuntime *lr);
// Binds http.address (the acceptors of `rt`, or of each loop with reuseport) and http.ssl.address; the error
// names the key and gives the system's text.
Result<void> listen(Runtime &rt, const conf::Config &cfg);

} // namespace ferry::server::detail
