#include "control/metrics.hpp"

#include "control/exposition.hpp"
#include "control/limit_metrics.hpp"

#include "control/probe_server.hpp"
#include "descriptors.hpp"
#include "ferry/base/log.hpp"
#include "ferry/version.hpp"
#include "http/response.hpp"
#include "ws/budget.hpp"

#include <chrono>
#include <cstdio>

namespace ferry::server::detail {

void HttpStats::read(Totals &into) const
{
    for (unsigned i = 0; i < 6; ++i)
        into.by_class[i] += by_class_[i].load(std::memory_order_relaxed);
    into.bytes += bytes_.load(std::memory_order_relaxed);
    duration_.read(into.duration);
}

namespace {

void histogram(std::string &out, const std::string &name, const std::string &labels, const pool::Histogram &h)
{
    const std::string sep = labels.empty() ? "" : ",";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < pool::Histogram::buckets; ++i) {
        cumulative += h.count[i];
        std::string le;
        if (i + 1 == pool::Histogram::buckets) {
            le = "+Inf";
        } else {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", static_cast<double>(pool::Histogram::bounds_us[i]) / 1e6);
            le = buf;
        }
        sample(out, name + "_bucket", labels + sep + "le=\"" + le + "\"", static_cast<double>(cumulative));
    }
    sample(out, name + "_sum", labels, static_cast<double>(h.sum_us) / 1e6);
    sample(out, name + "_count", labels, static_cast<double>(cumulative));
}

std::string pool_label(const PoolReport &p)
{
    return "pool=\"" + p.name + "\"";
}

void ws_budget_metrics(std::string &out, const WsBudgetReport &ws)
{
    family(out, "ferry_websocket_assembly_bytes", "gauge",
           "Bytes held now by client messages received in part (websockets.max_assembly_memory).");
    sample(out, "ferry_websocket_assembly_bytes", "", static_cast<double>(ws.assembly_bytes));
    family(out, "ferry_websocket_send_queue_bytes", "gauge",
           "Bytes waiting now in send queues, a frame counted in each queue that holds it "
           "(websockets.max_send_queue_memory).");
    sample(out, "ferry_websocket_send_queue_bytes", "", static_cast<double>(ws.send_queue_bytes));
    family(out, "ferry_websocket_budget_limit_bytes", "gauge",
           "The server-wide WebSocket memory budgets (0: no limit).");
    sample(out, "ferry_websocket_budget_limit_bytes", "budget=\"assembly\"",
           static_cast<double>(ws.assembly_limit));
    sample(out, "ferry_websocket_budget_limit_bytes", "budget=\"send_queue\"",
           static_cast<double>(ws.send_queue_limit));
    family(out, "ferry_websocket_budget_refusals_total", "counter",
           "Times a server-wide WebSocket budget was full: a connection closed (assembly: 1009; send_queue "
           "with overflow close: 1008) or its oldest queued messages dropped (send_queue, drop_oldest).");
    sample(out, "ferry_websocket_budget_refusals_total", "budget=\"assembly\"",
           static_cast<double>(ws.assembly_refusals));
    sample(out, "ferry_websocket_budget_refusals_total", "budget=\"send_queue\"",
           static_cast<double>(ws.send_queue_refusals));
    family(out, "ferry_websocket_message_timeouts_total", "counter",
           "Connections closed with 1008 because a message begun was not complete within "
           "websockets.message_timeout.");
    sample(out, "ferry_websocket_message_timeouts_total", "", static_cast<double>(ws.message_timeouts));
}

} // namespace

WsBudgetReport read_ws_budgets(const ws::WsBudgets &b)
{
    WsBudgetReport r;
    r.assembly_bytes = b.assembly.used();
    r.assembly_limit = b.assembly.limit();
    r.send_queue_bytes = b.send_queue.used();
    r.send_queue_limit = b.send_queue.limit();
    r.assembly_refusals = b.refusals[ws::WsBudgets::kind_assembly].load(std::memory_order_relaxed);
    r.send_queue_refusals = b.refusals[ws::WsBudgets::kind_send_queue].load(std::memory_order_relaxed);
    r.message_timeouts = b.message_timeouts.load(std::memory_order_relaxed);
    return r;
}

std::string format_metrics(const HttpStats::Totals &http, const std::vector<PoolReport> &pools,
                           double uptime_seconds, const ControlClosed &control, const WsBudgetReport *ws)
{
    std::string out;
    out.reserve(8192);
    family(out, "ferry_build_info", "gauge", "Ferry's version.");
    sample(out, "ferry_build_info", std::string("version=\"") + ferry::version + "\"", 1);
    family(out, "ferry_uptime_seconds", "gauge", "Seconds since the server started.");
    sample(out, "ferry_uptime_seconds", "", uptime_seconds);

    family(out, "ferry_http_requests_total", "counter",
           "HTTP requests answered, by status class (a client gone before the answer counts as 4xx).");
    static const char *classes[] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (unsigned i = 1; i < 6; ++i)
        sample(out, "ferry_http_requests_total", std::string("class=\"") + classes[i] + "\"",
               static_cast<double>(http.by_class[i]));
    if (http.by_class[0] > 0)
        sample(out, "ferry_http_requests_total", "class=\"other\"", static_cast<double>(http.by_class[0]));
    family(out, "ferry_http_request_duration_seconds", "histogram",
           "From a request's head to the end of its answer (a body sent from a file included).");
    histogram(out, "ferry_http_request_duration_seconds", "", http.duration);
    family(out, "ferry_http_response_bytes_total", "counter",
           "Bytes of HTTP answers written (heads and bodies).");
    sample(out, "ferry_http_response_bytes_total", "", static_cast<double>(http.bytes));

    family(out, "ferry_pool_queue_depth", "gauge", "Requests waiting for a worker now.");
    for (const auto &p : pools)
        sample(out, "ferry_pool_queue_depth", pool_label(p), static_cast<double>(p.stats.queued));
    family(out, "ferry_pool_queue_wait_seconds", "histogram",
           "How long requests waited for a worker (0 for those that found one idle).");
    for (const auto &p : pools) {
        pool::Histogram h = p.stats.queue_wait;
        const std::uint64_t waited = h.total();
        const std::uint64_t not_waiting =
            p.stats.requests > waited + p.stats.queued ? p.stats.requests - waited - p.stats.queued : 0;
        h.count[0] += not_waiting;
        histogram(out, "ferry_pool_queue_wait_seconds", pool_label(p), h);
    }
    family(out, "ferry_pool_requests_rejected_total", "counter",
           "Requests answered 503 at once because max_queue_size requests were waiting.");
    for (const auto &p : pools)
        sample(out, "ferry_pool_requests_rejected_total", pool_label(p),
               static_cast<double>(p.stats.rejected));

    family(out, "ferry_pool_workers", "gauge", "Worker processes by state.");
    static const char *states[] = {"spawning", "ready", "working", "stopping"};
    for (const auto &p : pools)
        for (const char *st : states) {
            unsigned n = 0;
            for (const auto &w : p.workers)
                n += w.state == st;
            sample(out, "ferry_pool_workers", pool_label(p) + ",state=\"" + st + "\"", n);
        }
    family(out, "ferry_pool_worker_memory_bytes", "gauge", "Resident memory of each worker process (RSS).");
    for (const auto &p : pools)
        for (const auto &w : p.workers)
            if (w.rss > 0)
                sample(out, "ferry_pool_worker_memory_bytes",
                       pool_label(p) + ",pid=\"" + std::to_string(w.pid) + "\"", static_cast<double>(w.rss));
    family(out, "ferry_pool_worker_jobs", "gauge", "Requests each live worker has served.");
    for (const auto &p : pools)
        for (const auto &w : p.workers)
            sample(out, "ferry_pool_worker_jobs", pool_label(p) + ",pid=\"" + std::to_string(w.pid) + "\"",
                   static_cast<double>(w.jobs));
    family(out, "ferry_pool_jobs_total", "counter", "Requests workers finished, past workers included.");
    for (const auto &p : pools)
        sample(out, "ferry_pool_jobs_total", pool_label(p), static_cast<double>(p.stats.jobs));
    family(out, "ferry_pool_workers_spawned_total", "counter", "Worker processes started.");
    for (const auto &p : pools)
        sample(out, "ferry_pool_workers_spawned_total", pool_label(p), static_cast<double>(p.stats.spawned));
    family(out, "ferry_pool_worker_restarts_total", "counter",
           "Worker processes that ended while the server ran, by cause (max_jobs, ttl, idle_ttl, memory, "
           "exec_ttl, reset, debug, worker_stop, error, crash, boot_failure).");
    for (const auto &p : pools)
        for (unsigned c = 1; c < static_cast<unsigned>(pool::Cause::shutdown); ++c)
            sample(out, "ferry_pool_worker_restarts_total",
                   pool_label(p) + ",cause=\"" + pool::cause_name(static_cast<pool::Cause>(c)) + "\"",
                   static_cast<double>(p.stats.exits[c]));
    family(out, "ferry_pool_worker_boot_seconds", "histogram",
           "From a worker's start to its handshake done.");
    for (const auto &p : pools)
        histogram(out, "ferry_pool_worker_boot_seconds", pool_label(p), p.stats.boot_time);

    family(out, "ferry_control_connections_closed_total", "counter",
           "Connections to the control listeners (rpc, status, metrics) closed by the server: idle (the "
           "oldest idle one, to make room for a new caller), first_byte_timeout (no byte in time), limit (a "
           "new one refused: every slot busy).");
    for (unsigned l = 0; l < control_listeners; ++l)
        for (unsigned r = 0; r < close_reasons; ++r)
            sample(out, "ferry_control_connections_closed_total",
                   std::string("listener=\"") + listener_name(static_cast<ControlListener>(l)) +
                       "\",reason=\"" + reason_name(static_cast<CloseReason>(r)) + "\"",
                   static_cast<double>(control.n[l][r]));
    if (ws)
        ws_budget_metrics(out, *ws);
    return out;
}

void format_descriptor_metrics(std::string &out, const DescriptorRefusals &refusals)
{
    family(out, "ferry_open_descriptors", "gauge", "File descriptors the server process has open now.");
    sample(out, "ferry_open_descriptors", "", static_cast<double>(open_descriptors()));
    family(out, "ferry_descriptor_limit", "gauge", "The server's soft RLIMIT_NOFILE.");
    sample(out, "ferry_descriptor_limit", "", static_cast<double>(descriptor_soft_limit()));
    family(out, "ferry_descriptor_exhaustion_total", "counter",
           "accept(2) and static file opens refused for want of a descriptor (EMFILE, ENFILE): accepting "
           "paused 100 ms, static files answered 503.");
    sample(out, "ferry_descriptor_exhaustion_total", "where=\"accept\"",
           static_cast<double>(refusals.count(FdUser::accept)));
    sample(out, "ferry_descriptor_exhaustion_total", "where=\"static\"",
           static_cast<double>(refusals.count(FdUser::static_files)));
}

struct MetricsServer::Impl {
    Impl(const ServerCounters &n, std::shared_ptr<ProbeServer> p) : probe(std::move(p)), counters(n) {}
    std::shared_ptr<ProbeServer> probe;
    const ServerCounters &counters;
    std::vector<const HttpStats *> loops;
    const Pools *by_name = nullptr;
    const ws::WsBudgets *ws_budgets = nullptr;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

    awaitable<void> answer(std::string &out, const Request &req)
    {
        const std::string_view target = req.target;
        const bool head = req.method == "HEAD";
        if (req.method != "GET" && !head) {
            append_error(out, 405, "/metrics answers GET", false, false);
            co_return;
        }
        if (target.substr(0, target.find('?')) != "/metrics") {
            append_error(out, 404, "the metrics are at /metrics", false, head);
            co_return;
        }
        HttpStats::Totals totals;
        for (const HttpStats *s : loops)
            s->read(totals);
        // (GCC 12: no co_await inside a braced initializer, it corrupts the frame.)
        std::vector<PoolReport> pools(by_name->all().size());
        for (std::size_t i = 0; i < pools.size(); ++i) {
            const NamedPool &e = by_name->all()[i];
            pools[i].name = e.name;
            pools[i].workers = co_await e.pool->snapshot(true);
            pools[i].stats = e.pool->stats();
        }
        const double uptime =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        Head h;
        h.status = 200;
        h.content_type = "text/plain; version=0.0.4; charset=utf-8";
        WsBudgetReport budgets;
        if (ws_budgets)
            budgets = read_ws_budgets(*ws_budgets);
        std::string body = format_metrics(totals, pools, uptime, counters.control.snapshot(),
                                          ws_budgets ? &budgets : nullptr);
        format_descriptor_metrics(body, counters.descriptors);
        counters.limits.format(body);
        counters.compression.format(body);
        counters.broker.format(body);
        h.content_length = body.size();
        h.keep_alive = false;
        append_head(out, h);
        if (!head)
            out += body;
    }
};

MetricsServer::MetricsServer(SharedState &loop, const conf::MetricsConfig &cfg, ServerCounters &counters,
                             std::shared_ptr<ProbeServer> shared)
    : impl_(std::make_shared<Impl>(
          counters, shared ? std::move(shared)
                           : std::make_shared<ProbeServer>(loop, cfg.address, "metrics.address", "metrics",
                                                           ControlListener::metrics, cfg.first_byte_timeout,
                                                           counters.control)))
{
}

MetricsServer::~MetricsServer() = default;

ProbeServer &MetricsServer::listener()
{
    return *impl_->probe;
}

Result<void> MetricsServer::bind()
{
    return impl_->probe->bind();
}

void MetricsServer::run(std::vector<const HttpStats *> loops, const Pools &pools,
                        const ws::WsBudgets *ws_budgets)
{
    impl_->loops = std::move(loops);
    impl_->by_name = &pools;
    impl_->ws_budgets = ws_budgets;
    log::info("metrics", "Prometheus metrics on http://" + address() + "/metrics");
    impl_->probe->route({"/metrics"}, [self = impl_.get()](std::string &out, const Request &req) {
        return self->answer(out, req);
    });
    impl_->probe->run();
}

void MetricsServer::stop()
{
    impl_->probe->stop();
}

std::string MetricsServer::address() const
{
    return impl_->probe->address();
}

} // namespace ferry::server::detail
