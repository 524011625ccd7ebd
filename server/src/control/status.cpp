#include "control/status.hpp"

#include "broker/counters.hpp"
#include "control/probe_server.hpp"

#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "ferry/server/http_parser.hpp"
#include "http/response.hpp"

#include <algorithm>
#include <vector>

namespace ferry::server::detail {
namespace {

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
    Impl(const conf::StatusConfig &c, std::shared_ptr<ProbeServer> p) : cfg(c), probe(std::move(p)) {}
    conf::StatusConfig cfg;
    std::shared_ptr<ProbeServer> probe;
    const Pools *pools = nullptr;
    const bool *stopping = nullptr;
    const broker::Counters *broker = nullptr;

    // One plugin's answer: ok, and a line for the body.
    awaitable<std::pair<bool, std::string>> check(pool::Pool *p, std::string plugin, bool ready)
    {
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
        const bool named = !plugins.empty();
        if (plugins.empty())
            for (const auto &e : pools->all())
                plugins.push_back(e.name);
        bool all = true;
        std::string body;
        for (const auto &p : plugins) {
            if (p == "broker" && broker) {
                all = all && (path == "/health" || broker->up());
                body += broker->line() + "\n";
                continue;
            }
            pool::Pool *pool = pools->find(p);
            if (!pool) {
                append_error(out, 404,
                             "no plugin \"" + relay::printable(p, 64) + "\" (Ferry has: " + pools->names() +
                                 ")",
                             false, head);
                co_return;
            }
            auto [ok, line] = co_await check(pool, p, path == "/ready");
            all = all && ok;
            body += line + "\n";
        }
        if (!named && broker && path == "/ready")
            body += broker->line() + "\n"; // said, not counted (see report_broker)
        append_text(out, all ? 200 : cfg.unavailable_status_code, body, false, head);
    }
};

StatusServer::StatusServer(SharedState &loop, const conf::StatusConfig &cfg, ControlCounters &counters,
                           std::shared_ptr<ProbeServer> shared)
    : impl_(std::make_shared<Impl>(cfg,
                                   shared ? std::move(shared)
                                          : std::make_shared<ProbeServer>(loop, cfg.address, "status.address",
                                                                          "status", ControlListener::status,
                                                                          cfg.first_byte_timeout, counters)))
{
}

StatusServer::~StatusServer()
{
    stop();
}

ProbeServer &StatusServer::listener()
{
    return *impl_->probe;
}

Result<void> StatusServer::bind()
{
    return impl_->probe->bind();
}

void StatusServer::run(const Pools &pools, const bool *stopping)
{
    Impl &s = *impl_;
    s.pools = &pools;
    s.stopping = stopping;
    log::info("status", "health checks on http://" + address() + "/health and /ready");
    s.probe->route({"/health", "/ready"}, [self = impl_.get()](std::string &out, const Request &req) {
        return self->answer(out, req);
    });
    s.probe->run();
}

void StatusServer::report_broker(const broker::Counters *b)
{
    impl_->broker = b;
}

void StatusServer::stop()
{
    impl_->probe->stop();
}

std::string StatusServer::address() const
{
    return impl_->probe->address();
}

} // namespace ferry::server::detail
