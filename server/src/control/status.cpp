#include "control/status.hpp"

#include "ferry/relay/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "ferry/server/http_parser.hpp"
#include "http/response.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <vector>

namespace ferry::server::detail {
namespace {

using tcp = asio::ip::tcp;

// The pools asked for: ?plugin=http&plugin=websockets or ?plugin=http,websockets.
std::vector<std::string> plugins_of(std::string_view target)
{
    std::vector<std::string> out;
    for (const std::string &v : query_values(target, "plugin")) {
        std::string_view rest = v;
        while (!rest.empty()) {
            auto comma = rest.find(',');
            if (comma != 0)
                out.emplace_back(rest.substr(0, comma));
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        }
    }
    return out;
}

} // namespace

struct StatusServer::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, const conf::StatusConfig &c) : io(io_), cfg(c), acceptor(io_) {}
    asio::io_context &io;
    conf::StatusConfig cfg;
    tcp::acceptor acceptor;
    pool::Pool *http = nullptr, *ws = nullptr;
    const bool *stopping = nullptr;
    bool stopped = false;
    unsigned connections = 0;

    // One plugin's answer: ok, and a line for the body.
    awaitable<std::pair<bool, std::string>> check(std::string plugin, bool ready)
    {
        pool::Pool *p = plugin == "http" ? http : plugin == "websockets" ? ws : nullptr;
        unsigned live = p->serving_workers();
        if (!ready)
            co_return std::make_pair(live > 0, plugin + ": " + std::to_string(live) + " live worker(s)");
        if (stopping && *stopping)
            co_return std::make_pair(false, plugin + ": the server is stopping");
        auto workers = co_await p->snapshot();
        auto idle = static_cast<unsigned>(
            std::count_if(workers.begin(), workers.end(), [](const auto &w) { return w.state == "ready"; }));
        co_return std::make_pair(idle > 0, plugin + ": " + std::to_string(idle) + " of " +
                                               std::to_string(live) + " worker(s) ready");
    }

    awaitable<void> answer(std::string &out, const Request &req)
    {
        const std::string_view target = req.target;
        const std::string_view path = target.substr(0, target.find('?'));
        const bool head = req.method == "HEAD";
        if (req.method != "GET" && !head) {
            append_error(out, 405, "the status endpoints answer GET", false, false);
            co_return;
        }
        if (path != "/health" && path != "/ready") {
            append_error(out, 404, "the status endpoints are /health and /ready", false, head);
            co_return;
        }
        std::vector<std::string> plugins = plugins_of(target);
        if (plugins.empty()) {
            plugins.push_back("http");
            if (ws)
                plugins.push_back("websockets");
        }
        bool all = true;
        std::string body;
        for (const auto &p : plugins) {
            if (p != "http" && !(p == "websockets" && ws)) {
                append_error(out, 404,
                             "no plugin \"" + relay::printable(p, 64) + "\" (Ferry has: http" +
                                 (ws ? ", websockets" : "") + ")",
                             false, head);
                co_return;
            }
            auto [ok, line] = co_await check(p, path == "/ready");
            all = all && ok;
            body += line + "\n";
        }
        append_text(out, all ? 200 : cfg.unavailable_status_code, body, false, head);
    }

    static awaitable<void> serve(std::shared_ptr<Impl> self, std::shared_ptr<tcp::socket> sockp)
    {
        tcp::socket &sock = *sockp;
        ++self->connections;
        asio::steady_timer deadline(self->io);
        deadline.expires_after(std::chrono::seconds(5)); // a probe that does not finish its request
        deadline.async_wait([sockp](const error_code &ec) {
            if (!ec) {
                error_code ignored;
                sockp->close(ignored);
            }
        });
        Limits limits;
        limits.max_header_size = 8 * 1024;
        limits.max_body_size = 0;
        HttpParser parser(limits);
        std::string out;
        for (;;) {
            auto ev = parser.next();
            if (ev == HttpParser::Event::need_more) {
                std::span<char> room = parser.prepare();
                auto [ec, n] = co_await sock.async_read_some(asio::buffer(room.data(), room.size()), nothrow);
                if (ec)
                    break;
                parser.commit(n);
                continue;
            }
            if (ev == HttpParser::Event::head)
                continue;
            if (ev == HttpParser::Event::error) {
                append_error(out, parser.error_status(), parser.error_message(), false, false);
            } else {
                co_await self->answer(out, parser.request());
            }
            co_await asio::async_write(sock, asio::buffer(out), nothrow);
            error_code ignored;
            sock.shutdown(tcp::socket::shutdown_send, ignored);
            break;
        }
        deadline.cancel();
        --self->connections;
        co_return;
    }

    static awaitable<void> accept(std::shared_ptr<Impl> self)
    {
        while (!self->stopped) {
            auto [ec, sock] = co_await self->acceptor.async_accept(nothrow);
            if (ec) {
                if (self->stopped || ec == asio::error::operation_aborted)
                    co_return;
                log::error("status", "accept failed: " + ec.message());
                asio::steady_timer t(self->io, std::chrono::milliseconds(100));
                co_await t.async_wait(nothrow);
                continue;
            }
            if (self->connections >= 64)
                continue; // probes do not need more; `sock` closes
            asio::co_spawn(self->io, serve(self, std::make_shared<tcp::socket>(std::move(sock))),
                           log_exceptions{"status"});
        }
        co_return;
    }
};

StatusServer::StatusServer(asio::io_context &io, const conf::StatusConfig &cfg)
    : impl_(std::make_shared<Impl>(io, cfg))
{
}

StatusServer::~StatusServer()
{
    stop();
}

Result<void> StatusServer::bind()
{
    Impl &s = *impl_;
    try {
        tcp::resolver resolver(s.io);
        auto results = resolver.resolve(s.cfg.address.host, std::to_string(s.cfg.address.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service);
        tcp::endpoint ep = *results.begin();
        s.acceptor.open(ep.protocol());
        s.acceptor.set_option(tcp::acceptor::reuse_address(true));
        s.acceptor.bind(ep);
        s.acceptor.listen();
    } catch (const std::exception &e) {
        return fail("status.address: cannot listen on " + s.cfg.address.to_string() + ": " + e.what());
    }
    return {};
}

void StatusServer::run(pool::Pool &http, pool::Pool *ws, const bool *stopping)
{
    Impl &s = *impl_;
    s.http = &http;
    s.ws = ws;
    s.stopping = stopping;
    log::info("status", "health checks on http://" + address() + "/health and /ready");
    asio::co_spawn(s.io, Impl::accept(impl_), log_exceptions{"status accept"});
}

void StatusServer::stop()
{
    impl_->stopped = true;
    error_code ignored;
    impl_->acceptor.close(ignored);
}

std::string StatusServer::address() const
{
    error_code ec;
    auto ep = impl_->acceptor.local_endpoint(ec);
    if (ec)
        return impl_->cfg.address.to_string();
    std::string host = ep.address().to_string();
    return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

} // namespace ferry::server::detail
