// The server-wide budgets of docs/architecture.md ("Budgets") as /metrics shows them: what the request body
// budget holds and what it denied, the upload files on disk, and the limits that refused something without a
// family of their own (a worker's response head, a body slower than min_body_rate). Server-wide, one object
// in ServerCounters: run() tells it what it owns before the loops run, and the counters are atomics any loop
// bumps.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace ferry {
class Budget;
}

namespace ferry::server::detail {

class TlsContext;

enum class LimitEvent : unsigned {
    response_head, // a worker's response head over max_response_head / max_response_headers: 502
    slow_body,     // a request body slower than http.limits.min_body_rate: 408
    head_memory,   // a receive buffer that http.limits.max_head_memory could not grow: 503
    http2_abuse,   // an HTTP/2 connection closed for a flood or a rapid reset (h2/connection.cpp)
    count_,
};

class LimitCounters {
public:
    // What run() owns (set before the loops run; null: no such budget, the scrape shows zeros).
    const Budget *body_budget = nullptr;
    const Budget *head_budget = nullptr;
    std::string uploads_dir, uploads_prefix; // this server's upload files ("": none)
    const TlsContext *tls = nullptr;         // http.ssl: its handshakes (null: no TLS, no family)

    void count(LimitEvent e) { events_[static_cast<unsigned>(e)].fetch_add(1, std::memory_order_relaxed); }
    // ferry_body_memory_bytes, ferry_body_memory_limit_bytes, ferry_body_memory_denied_total{rule},
    // ferry_upload_files, ferry_limit_refusals_total{limit}; with TLS, ferry_tls_handshakes_total{result}.
    void format(std::string &out) const;

private:
    std::uint64_t upload_files() const;
    std::uint64_t events(LimitEvent e) const
    {
        return events_[static_cast<unsigned>(e)].load(std::memory_order_relaxed);
    }
    std::array<std::atomic<std::uint64_t>, static_cast<unsigned>(LimitEvent::count_)> events_{};
};

} // namespace ferry::server::detail
