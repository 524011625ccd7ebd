// /metrics' text: the Prometheus exposition format (HELP and TYPE once per family, cumulative buckets ending
// with +Inf equal to _count), and the per-loop HTTP counters.
#include "control/metrics.hpp"
#include "ws/budget.hpp"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

using namespace ferry::server::detail;
using ferry::pool::Cause;
using ferry::pool::Histogram;

namespace {

// name{labels} → value, for every sample line; and every family's TYPE.
struct Parsed {
    std::map<std::string, double> samples;
    std::map<std::string, std::string> types;
    std::map<std::string, int> helps;
};

Parsed parse(const std::string &text)
{
    Parsed p;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("# TYPE ", 0) == 0) {
            auto rest = line.substr(7);
            auto sp = rest.find(' ');
            EXPECT_EQ(p.types.count(rest.substr(0, sp)), 0u) << "TYPE twice: " << line;
            p.types[rest.substr(0, sp)] = rest.substr(sp + 1);
            continue;
        }
        if (line.rfind("# HELP ", 0) == 0) {
            ++p.helps[line.substr(7, line.find(' ', 7) - 7)];
            continue;
        }
        auto sp = line.rfind(' ');
        EXPECT_NE(sp, std::string::npos) << line;
        p.samples[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    }
    return p;
}

} // namespace

TEST(Metrics, HttpStatsCountByClassAndTime)
{
    HttpStats s;
    s.record(200, 50, 100); // first bucket (<= 100 us)
    s.record(204, 150, 10); // second
    s.record(404, 2'000'000, 5);
    s.record(0, 10, 0);           // the client left first: 499
    s.record(503, 99'000'000, 1); // past the last bound: +Inf only
    s.record_refused(400);
    s.record_refused(99); // not a status: other
    HttpStats::Totals t;
    s.read(t);
    EXPECT_EQ(t.by_class[2], 2u);
    EXPECT_EQ(t.by_class[4], 3u);
    EXPECT_EQ(t.by_class[5], 1u);
    EXPECT_EQ(t.by_class[0], 1u);
    EXPECT_EQ(t.bytes, 116u);
    EXPECT_EQ(t.duration.total(), 5u) << "refused requests are not timed";
    EXPECT_EQ(t.duration.count[0], 2u);
    EXPECT_EQ(t.duration.count[1], 1u);
    EXPECT_EQ(t.duration.count[Histogram::buckets - 1], 1u);
    EXPECT_EQ(t.duration.sum_us, 50u + 150 + 2'000'000 + 10 + 99'000'000);
}

TEST(Metrics, ExpositionFormat)
{
    HttpStats s;
    for (int i = 0; i < 10; ++i)
        s.record(200, 300, 1000);
    s.record(500, 3000, 10);
    HttpStats::Totals t;
    s.read(t);
    PoolReport p;
    p.name = "http";
    p.stats.requests = 11;
    p.stats.jobs = 11;
    p.stats.queue_wait.count[3] = 2; // two waited up to 1 ms
    p.stats.queue_wait.sum_us = 1500;
    p.stats.exits[static_cast<unsigned>(Cause::memory)] = 3;
    p.stats.spawned = 5;
    p.stats.boot_time.count[8] = 5;
    p.workers.push_back({});
    p.workers.back().pid = 42;
    p.workers.back().state = "working";
    p.workers.back().rss = 12345678;
    p.workers.back().jobs = 7;
    ControlClosed closed;
    closed.n[static_cast<unsigned>(ControlListener::rpc)][static_cast<unsigned>(CloseReason::idle)] = 6;
    closed.n[static_cast<unsigned>(ControlListener::status)]
            [static_cast<unsigned>(CloseReason::first_byte_timeout)] = 2;
    const Parsed m = parse(format_metrics(t, {p}, 12.5, closed));

    for (const auto &[name, type] : m.types)
        EXPECT_EQ(m.helps.at(name), 1) << name;
    EXPECT_EQ(m.types.at("ferry_http_requests_total"), "counter");
    EXPECT_EQ(m.types.at("ferry_http_request_duration_seconds"), "histogram");
    EXPECT_EQ(m.types.at("ferry_pool_workers"), "gauge");
    EXPECT_EQ(m.samples.at("ferry_http_requests_total{class=\"2xx\"}"), 10);
    EXPECT_EQ(m.samples.at("ferry_http_requests_total{class=\"5xx\"}"), 1);
    EXPECT_EQ(m.samples.count("ferry_http_requests_total{class=\"other\"}"), 0u) << "shown only when seen";
    // Cumulative buckets: 300 us is under 0.0005 s, 3 ms under 0.005 s.
    EXPECT_EQ(m.samples.at("ferry_http_request_duration_seconds_bucket{le=\"0.00025\"}"), 0);
    EXPECT_EQ(m.samples.at("ferry_http_request_duration_seconds_bucket{le=\"0.0005\"}"), 10);
    EXPECT_EQ(m.samples.at("ferry_http_request_duration_seconds_bucket{le=\"0.0025\"}"), 10);
    EXPECT_EQ(m.samples.at("ferry_http_request_duration_seconds_bucket{le=\"0.005\"}"), 11);
    EXPECT_EQ(m.samples.at("ferry_http_request_duration_seconds_bucket{le=\"+Inf\"}"), 11);
    EXPECT_EQ(m.samples.at("ferry_http_request_duration_seconds_count"), 11);
    EXPECT_DOUBLE_EQ(m.samples.at("ferry_http_request_duration_seconds_sum"), 0.006);
    // The queue: requests that found a worker idle count as waiting 0 (in the first bucket).
    EXPECT_EQ(m.samples.at("ferry_pool_queue_wait_seconds_bucket{pool=\"http\",le=\"0.0001\"}"), 9);
    EXPECT_EQ(m.samples.at("ferry_pool_queue_wait_seconds_count{pool=\"http\"}"), 11);
    EXPECT_EQ(m.samples.at("ferry_pool_workers{pool=\"http\",state=\"working\"}"), 1);
    EXPECT_EQ(m.samples.at("ferry_pool_workers{pool=\"http\",state=\"ready\"}"), 0);
    EXPECT_EQ(m.samples.at("ferry_pool_worker_memory_bytes{pool=\"http\",pid=\"42\"}"), 12345678);
    EXPECT_EQ(m.samples.at("ferry_pool_worker_jobs{pool=\"http\",pid=\"42\"}"), 7);
    EXPECT_EQ(m.samples.at("ferry_pool_worker_restarts_total{pool=\"http\",cause=\"memory\"}"), 3);
    EXPECT_EQ(m.samples.at("ferry_pool_worker_restarts_total{pool=\"http\",cause=\"crash\"}"), 0);
    EXPECT_EQ(m.samples.count("ferry_pool_worker_restarts_total{pool=\"http\",cause=\"none\"}"), 0u);
    EXPECT_EQ(m.samples.count("ferry_pool_worker_restarts_total{pool=\"http\",cause=\"shutdown\"}"), 0u)
        << "the stop is not a restart";
    EXPECT_EQ(m.samples.at("ferry_pool_worker_boot_seconds_count{pool=\"http\"}"), 5);
    EXPECT_EQ(m.samples.at("ferry_uptime_seconds"), 12.5);
    EXPECT_EQ(m.types.at("ferry_control_connections_closed_total"), "counter");
    EXPECT_EQ(m.samples.at("ferry_control_connections_closed_total{listener=\"rpc\",reason=\"idle\"}"), 6);
    EXPECT_EQ(
        m.samples.at(
            "ferry_control_connections_closed_total{listener=\"status\",reason=\"first_byte_timeout\"}"),
        2);
    EXPECT_EQ(m.samples.at("ferry_control_connections_closed_total{listener=\"metrics\",reason=\"limit\"}"),
              0);
}

TEST(Metrics, WebsocketBudgetsOnlyWithWebsockets)
{
    HttpStats::Totals t;
    PoolReport p;
    p.name = "http";
    const Parsed without = parse(format_metrics(t, {p}, 1));
    EXPECT_EQ(without.types.count("ferry_websocket_assembly_bytes"), 0u);

    // The report read from the shared budgets, as the scrape does.
    ferry::conf::WebsocketsConfig cfg;
    cfg.max_assembly_memory = 1000;
    cfg.max_send_queue_memory = 0;
    ferry::server::detail::ws::WsBudgets b(cfg);
    ASSERT_TRUE(b.assembly.try_take(600));
    EXPECT_FALSE(b.assembly.try_take(401));
    b.send_queue.take(5000); // limit 0: counted, never refused
    EXPECT_TRUE(b.send_queue.try_take(1u << 30));
    b.send_queue.give(1u << 30);
    b.report(ferry::server::detail::ws::WsBudgets::kind_assembly, "test line");
    b.report(ferry::server::detail::ws::WsBudgets::kind_assembly, "test line"); // counted, not logged
    b.report(ferry::server::detail::ws::WsBudgets::kind_send_queue, "test line");
    b.report(ferry::server::detail::ws::WsBudgets::kind_message_timeout, "test line");
    const WsBudgetReport r = read_ws_budgets(b);
    const Parsed m = parse(format_metrics(t, {p}, 1, {}, &r));
    for (const auto &[name, type] : m.types)
        EXPECT_EQ(m.helps.at(name), 1) << name;
    EXPECT_EQ(m.types.at("ferry_websocket_assembly_bytes"), "gauge");
    EXPECT_EQ(m.types.at("ferry_websocket_budget_refusals_total"), "counter");
    EXPECT_EQ(m.types.at("ferry_websocket_message_timeouts_total"), "counter");
    EXPECT_EQ(m.samples.at("ferry_websocket_assembly_bytes"), 600);
    EXPECT_EQ(m.samples.at("ferry_websocket_send_queue_bytes"), 5000);
    EXPECT_EQ(m.samples.at("ferry_websocket_budget_limit_bytes{budget=\"assembly\"}"), 1000);
    EXPECT_EQ(m.samples.at("ferry_websocket_budget_limit_bytes{budget=\"send_queue\"}"), 0);
    EXPECT_EQ(m.samples.at("ferry_websocket_budget_refusals_total{budget=\"assembly\"}"), 2);
    EXPECT_EQ(m.samples.at("ferry_websocket_budget_refusals_total{budget=\"send_queue\"}"), 1);
    EXPECT_EQ(m.samples.at("ferry_websocket_message_timeouts_total"), 1);
}
