#include "control/limit_metrics.hpp"

#include "control/exposition.hpp"
#include "ferry/base/budget.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <dirent.h>
#include <mutex>

namespace ferry::server::detail {

namespace {
std::atomic<const Budget *> body_budget{nullptr}, head_budget{nullptr};
std::mutex uploads_mutex;
std::string uploads_dir, uploads_prefix; // under uploads_mutex
std::array<std::atomic<std::uint64_t>, static_cast<unsigned>(LimitEvent::count_)> events{};

// This server's upload files now: a scan of the directory at the scrape (rare), never on the request path.
std::uint64_t upload_files()
{
    std::string dir, prefix;
    {
        std::lock_guard lock(uploads_mutex);
        dir = uploads_dir;
        prefix = uploads_prefix;
    }
    if (dir.empty())
        return 0;
    DIR *d = ::opendir(dir.c_str());
    if (!d)
        return 0;
    std::uint64_t n = 0;
    while (const dirent *e = ::readdir(d)) {
        std::string_view name(e->d_name);
        if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix &&
            !name.ends_with(".lock"))
            ++n;
    }
    ::closedir(d);
    return n;
}
} // namespace

void register_body_budget(const Budget *budget)
{
    body_budget.store(budget);
}

void register_head_budget(const Budget *budget)
{
    head_budget.store(budget);
}

void register_uploads(const std::string &dir, const std::string &prefix)
{
    std::lock_guard lock(uploads_mutex);
    uploads_dir = dir;
    uploads_prefix = prefix;
}

void count_limit(LimitEvent e)
{
    events[static_cast<unsigned>(e)].fetch_add(1, std::memory_order_relaxed);
}

void format_limit_metrics(std::string &out)
{
    const Budget *b = body_budget.load();
    family(out, "ferry_body_memory_bytes", "gauge",
           "Request and response body memory held now, all connections (http.limits.max_body_memory).");
    sample(out, "ferry_body_memory_bytes", "", b ? static_cast<double>(b->used()) : 0.0);
    family(out, "ferry_body_memory_limit_bytes", "gauge", "http.limits.max_body_memory.");
    sample(out, "ferry_body_memory_limit_bytes", "", b ? static_cast<double>(b->limit()) : 0.0);
    family(
        out, "ferry_body_memory_denied_total", "counter",
        "Request body memory denied: share (past one connection's 1/8: a form gets 413, a raw body spills to "
        "a temp file), spent (the budget is full: a form gets 503, a raw body spills, a response body goes "
        "to a temp file).");
    sample(out, "ferry_body_memory_denied_total", "rule=\"share\"",
           b ? static_cast<double>(b->denied(Budget::Take::over_share)) : 0.0);
    sample(out, "ferry_body_memory_denied_total", "rule=\"spent\"",
           b ? static_cast<double>(b->denied(Budget::Take::spent)) : 0.0);
    const Budget *h = head_budget.load();
    family(out, "ferry_head_memory_bytes", "gauge",
           "Receive buffers past each connection's first 8 KiB (large heads, pipelined requests) now, all "
           "connections (http.limits.max_head_memory).");
    sample(out, "ferry_head_memory_bytes", "", h ? static_cast<double>(h->used()) : 0.0);
    family(out, "ferry_head_memory_limit_bytes", "gauge", "http.limits.max_head_memory (0: no limit).");
    sample(out, "ferry_head_memory_limit_bytes", "", h ? static_cast<double>(h->limit()) : 0.0);
    family(out, "ferry_upload_files", "gauge",
           "Upload temp files of this server in http.uploads.dir now (deleted after each response).");
    sample(out, "ferry_upload_files", "", static_cast<double>(upload_files()));
    family(out, "ferry_limit_refusals_total", "counter",
           "Requests refused by a limit with no family of its own: response_head (a worker's response head "
           "over 64 KiB or 1000 lines: 502), slow_body (a body slower than http.limits.min_body_rate: 408), "
           "head_memory (a receive buffer http.limits.max_head_memory could not grow: 503).");
    sample(out, "ferry_limit_refusals_total", "limit=\"response_head\"",
           static_cast<double>(events[static_cast<unsigned>(LimitEvent::response_head)].load()));
    sample(out, "ferry_limit_refusals_total", "limit=\"slow_body\"",
           static_cast<double>(events[static_cast<unsigned>(LimitEvent::slow_body)].load()));
    sample(out, "ferry_limit_refusals_total", "limit=\"head_memory\"",
           static_cast<double>(events[static_cast<unsigned>(LimitEvent::head_memory)].load()));
}

} // namespace ferry::server::detail
