#include "handlers/websocket.hpp"

#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "handlers/failure.hpp"
#include "handlers/php.hpp"
#include "http/response.hpp"
#include "shared_state.hpp"
#include "transport/transport.hpp"
#include "ws/actions.hpp"
#include "ws/connection.hpp"
#include "ws/handshake.hpp"

#include <algorithm>

namespace ferry::server::detail {
namespace {

// Headers the worker may not set on a 101: the handshake's own, and those of a body.
bool reserved_on_101(std::string_view name)
{
    for (std::string_view r : {"Upgrade", "Sec-WebSocket-Accept", "Sec-WebSocket-Extensions",
                               "Sec-WebSocket-Protocol", "Content-Type"})
        if (iequals(name, r))
            return true;
    return false;
}

// ... and on an event stream's 200: those, and the stream's own Cache-Control.
bool reserved_on_sse(std::string_view name)
{
    return reserved_on_101(name) || iequals(name, "Cache-Control");
}

class WebSocketConnection final : public Handler::Connection {
public:
    WebSocketConnection(SharedState &st, ws::WsLoop &loop, const TrustedProxies &proxies)
        : st_(st), loop_(loop), proxies_(proxies)
    {
    }

    awaitable<After> handle(Exchange &ex) override
    {
        const Request &req = ex.request;
        const std::string &remote = ex.transport.remote();
        const bool sse = !loop_.cfg.sse_path.empty() && !ws::is_upgrade_for(req, loop_.cfg.path) &&
                         target_path(req.target) == loop_.cfg.sse_path;
        if (sse && req.method != "GET") {
            refuse(ex, 405, "an event stream is a GET request", "Allow: GET\r\n");
            co_return After::close;
        }
        if (auto refusal = sse ? ws::Refusal{} : ws::check_upgrade(req, loop_.cfg.allowed_origin);
            refusal.status != 0) {
            log::info("ws", remote + ": " + std::to_string(refusal.status) + " " + refusal.message);
            refuse(ex, refusal.status, refusal.message, refusal.extra);
            co_return After::close;
        }
        if (st_.draining) {
            refuse(ex, 503, "the server is stopping", {}); // with Retry-After, as every 503
            co_return After::close;
        }
        const std::uint64_t id = loop_.make_id(st_.loop);
        relay::RequestContext ctx;
        build_request_context(ctx, req, remote, st_.default_host, ex.transport.tls());
        if (!proxies_.empty())
            proxies_.apply(req, ctx);
        const std::uint64_t last_event_id =
            ws::add_open_event(ctx, id, loop_.publisher.node(), sse, req.target,
                               sse ? req.header("Last-Event-ID") : std::string_view());
        pool::Reply reply;
        co_await loop_.pool.exec(ctx, pool::BodyRef{}, reply, pool::Client{ex.transport.native_handle()},
                                 st_.loop);
        std::string body = co_await reply.collect();
        ex.worker_pid = reply.worker_pid;
        if (reply.outcome != pool::Outcome::ok) {
            const Failure f = failure_for(reply.outcome, st_.config.http.internal_error_code);
            log::warn("ws", remote + ": the open event failed (" + std::to_string(f.status) +
                                "): " + reply.message);
            refuse(ex, f.status, f.text, {});
            co_return After::close;
        }
        const relay::ResponseContext &rc = reply.response;
        if (rc.status >= 300 && rc.status <= 599) { // the worker said no
            log::info("ws", remote + ": the worker refused the upgrade with " + std::to_string(rc.status));
            Head h;
            h.status = rc.status;
            h.worker = &rc;
            h.content_length = body.size();
            h.keep_alive = false;
            ex.status = h.status;
            append_head(ex.out, h);
            ex.out += body;
            co_return After::close;
        }
        if (rc.status != 101 && (rc.status < 200 || rc.status > 299)) {
            log::error("ws", "worker " + std::to_string(reply.worker_pid) +
                                 " answered the open event with status " + std::to_string(rc.status) +
                                 " (expected 101 or 2xx to accept, 3xx-5xx to refuse)");
            refuse(ex, 500, {}, {});
            co_return After::close;
        }
        auto actions = ws::parse_actions(body);
        if (!actions) {
            log::error("ws", "worker " + std::to_string(reply.worker_pid) +
                                 " answered the open event with bad actions: " + actions.error().message);
            refuse(ex, 500, {}, {});
            co_return After::close;
        }
        if (sse)
            co_return co_await start_stream(ex, rc, *actions, id, last_event_id);
        // The 101, its handshake headers ours (http/response.cpp writes it with the worker's others).
        std::string handshake = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ";
        handshake += ws::accept_key(req.header("Sec-WebSocket-Key"));
        handshake += "\r\n";
        const auto offered = ws::offered_protocols(req);
        for (const auto &f : rc.headers) {
            if (!iequals(f.name, "Sec-WebSocket-Protocol"))
                continue;
            if (f.values.size() != 1 ||
                std::find(offered.begin(), offered.end(), f.values[0]) == offered.end()) {
                log::error("ws", "worker " + std::to_string(reply.worker_pid) +
                                     " chose a Sec-WebSocket-Protocol the client did not offer");
                refuse(ex, 500, {}, {});
                co_return After::close;
            }
            handshake += "Sec-WebSocket-Protocol: " + f.values[0] + "\r\n";
        }
        Head h;
        h.status = 101;
        h.worker = &rc;
        h.extra = handshake;
        h.reserved = reserved_on_101;
        h.framing = Framing::none;
        std::string &out = ex.out;
        append_head(out, h);
        ex.status = 101;
        if (!co_await ex.transport.flush(out))
            co_return After::close; // the client left while PHP decided (its close event never comes)
        std::string early(ex.parser ? ex.parser->take_buffered() : std::string_view());
        auto conn = take_over(ex, id, false);
        conn->apply(*actions);
        conn->start(early);
        co_return After::ended;
    }

private:
    // An accepted event stream: the 200 head, then the connection is an SSE subscriber.
    awaitable<After> start_stream(Exchange &ex, const relay::ResponseContext &rc,
                                  const std::vector<ws::Action> &actions, std::uint64_t id,
                                  std::uint64_t after)
    {
        Head h;
        h.worker = &rc;
        h.extra = "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
        h.reserved = reserved_on_sse;
        h.framing = Framing::chunked;
        std::string &out = ex.out;
        append_head(out, h);
        ex.status = 200;
        if (!co_await ex.transport.flush(out))
            co_return After::close;
        auto conn = take_over(ex, id, true);
        conn->apply(actions);
        if (after > 0) { // Last-Event-ID: what the kept history of its topics has after it
            std::vector<std::string> topics;
            for (const auto &m : conn->memberships())
                topics.push_back(m.topic->name);
            auto kept = loop_.hub.history(topics, after);
            if (!loop_.publisher.shares_history()) {
                conn->send_history(kept);
            } else {
                // The events other nodes sent it too (the client may have read them there); live ones
                // wait meanwhile, so the stream stays in order and each event comes once.
                conn->hold();
                auto shared = co_await loop_.publisher.shared_history(topics, after);
                kept.insert(kept.end(), shared.begin(), shared.end());
                conn->resume(ws::in_id_order(std::move(kept)));
            }
        }
        conn->start({});
        co_return After::ended;
    }

    // The session lets the stream go; it becomes a connection of the loop.
    std::shared_ptr<ws::WsConn> take_over(Exchange &ex, std::uint64_t id, bool sse)
    {
        std::string remote = ex.transport.remote();
        return ws::WsConn::make(loop_, ex.transport.take_stream(), id, std::move(remote), sse);
    }

    static std::string_view target_path(std::string_view target)
    {
        return target.substr(0, target.find('?'));
    }

    static void refuse(Exchange &ex, int status, std::string_view detail, std::string_view extra)
    {
        ex.status = status;
        append_error(ex.out, status, detail, false, false, extra);
    }

    SharedState &st_;
    ws::WsLoop &loop_;
    const TrustedProxies &proxies_;
};

} // namespace

WebSocketHandler::WebSocketHandler(SharedState &state, ws::WsLoop &loop)
    : state_(state), loop_(loop), proxies_(state.config.http.trusted_subnets)
{
}

bool WebSocketHandler::accepts(const Request &req) const
{
    if (ws::is_upgrade_for(req, loop_.cfg.path))
        return true;
    const auto &sse = loop_.cfg.sse_path;
    return !sse.empty() && std::string_view(req.target).substr(0, req.target.find('?')) == sse;
}

std::unique_ptr<Handler::Connection> WebSocketHandler::connect()
{
    return std::make_unique<WebSocketConnection>(state_, loop_, proxies_);
}

} // namespace ferry::server::detail
