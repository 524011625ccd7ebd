// The server-wide budgets of docs/architecture.md ("Budgets") as /metrics shows them: what the request body
// budget holds and what it denied, the upload files on disk, and the limits that refused something without a
// family of their own (a worker's response head, a body slower than min_body_rate). Process-wide: run()
// registers what it owns, and the counters are atomics any loop bumps.
#pragma once

#include <string>

namespace ferry {
class Budget;
}

namespace ferry::server::detail {

// What run() owns for the time it runs; nullptr when it ends (the scrape then shows zeros).
void register_body_budget(const Budget *budget);
void register_head_budget(const Budget *budget);
void register_uploads(const std::string &dir, const std::string &prefix);

enum class LimitEvent : unsigned {
    response_head, // a worker's response head over max_response_head / max_response_headers: 502
    slow_body,     // a request body slower than http.limits.min_body_rate: 408
    head_memory,   // a receive buffer that http.limits.max_head_memory could not grow: 503
    count_,
};
void count_limit(LimitEvent e);

// ferry_body_memory_bytes, ferry_body_memory_limit_bytes, ferry_body_memory_denied_total{rule},
// ferry_upload_files, ferry_limit_refusals_total{limit}.
void format_limit_metrics(std::string &out);

} // namespace ferry::server::detail
