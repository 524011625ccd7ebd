#include "control/limit_metrics.hpp"
#include "tls/tls_context.hpp"

#include "control/exposition.hpp"
#include "ferry/base/budget.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <dirent.h>

namespace ferry::server::detail {

// This server's upload files now: a scan of the directory at the scrape (rare), never on the request path.
std::uint64_t LimitCounters::upload_files() const
{
    const std::string &dir = uploads_dir, &prefix = uploads_prefix;
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

void LimitCounters::format(std::string &out) const
{
    const Budget *b = body_budget;
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
    const Budget *h = head_budget;
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
           "head_memory (a receive buffer http.limits.max_head_memory could not grow: 503), http2_abuse (an "
           "HTTP/2 connection closed for a SETTINGS/PING flood or streams reset faster than allowed).");
    sample(out, "ferry_limit_refusals_total", "limit=\"response_head\"",
           static_cast<double>(events(LimitEvent::response_head)));
    sample(out, "ferry_limit_refusals_total", "limit=\"slow_body\"",
           static_cast<double>(events(LimitEvent::slow_body)));
    sample(out, "ferry_limit_refusals_total", "limit=\"head_memory\"",
           static_cast<double>(events(LimitEvent::head_memory)));
    sample(out, "ferry_limit_refusals_total", "limit=\"http2_abuse\"",
           static_cast<double>(events(LimitEvent::http2_abuse)));
    if (const TlsContext *t = tls) {
        family(
            out, "ferry_tls_handshakes_total", "counter",
            "TLS handshakes on http.ssl.address: done, failed (garbage, a client gone, a refused "
            "certificate, "
            "http.ssl.handshake_timeout) and refused (http.ssl.max_handshakes in progress: closed at once).");
        const auto n = [](const std::atomic<std::uint64_t> &a) { return static_cast<double>(a.load()); };
        sample(out, "ferry_tls_handshakes_total", "result=\"done\"", n(t->done));
        sample(out, "ferry_tls_handshakes_total", "result=\"failed\"", n(t->failed));
        sample(out, "ferry_tls_handshakes_total", "result=\"refused\"", n(t->refused));
    }
}

} // namespace ferry::server::detail
