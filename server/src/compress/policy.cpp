#include "policy.hpp"

#include "control/exposition.hpp"
#include "ferry/server/http_grammar.hpp"
#include "http/response.hpp"
#include "static/conditional.hpp"

namespace ferry::server::detail::compress {

bool type_listed(const std::vector<std::string> &types, std::string_view content_type)
{
    const std::string_view media = trim_ows(content_type.substr(0, content_type.find(';')));
    const auto slash = media.find('/');
    if (slash == std::string_view::npos || media.empty())
        return false;
    for (const std::string &t : types) {
        if (t.size() == slash + 2 && t.compare(slash, 2, "/*") == 0) {
            if (iequals(media.substr(0, slash), std::string_view(t).substr(0, slash)))
                return true;
        } else if (iequals(media, t)) {
            return true;
        }
    }
    return false;
}

Plan plan(const conf::CompressionConfig &config, const Request &req, const relay::ResponseContext &rc,
          int status, std::optional<std::size_t> whole_size)
{
    if (!config.enabled || req.method == "HEAD" || no_body_status(status) || status == 206 || status < 200)
        return {};
    // One pass over the worker's headers: what rules compression out, and the media type.
    std::string_view type;
    for (const auto &f : rc.headers) {
        if (f.values.empty())
            continue;
        if (iequals(f.name, "Content-Encoding") || iequals(f.name, "Content-Range"))
            return {};
        if (iequals(f.name, "Content-Type") && type.empty())
            type = f.values.front();
        else if (iequals(f.name, "Cache-Control"))
            for (std::string_view v : f.values)
                if (list_has(v, "no-transform"))
                    return {};
    }
    if (!type_listed(config.types, type))
        return {};
    if (whole_size && *whole_size < config.min_length)
        return {};
    Plan p;
    p.vary = true;
    p.coding = choose(config, req.header("Accept-Encoding"));
    return p;
}

Coding choose(const conf::CompressionConfig &config, std::string_view accept)
{
    if (accept.empty())
        return Coding::identity;
    const double gzip = std::max(accept_encoding_q(accept, "gzip"), accept_encoding_q(accept, "x-gzip"));
    const double br = config.brotli ? accept_encoding_q(accept, "br") : 0.0;
    if (br > 0 && (br > gzip || (br == gzip && config.prefer == "br")))
        return Coding::br;
    return gzip > 0 ? Coding::gzip : Coding::identity;
}

bool Counters::take_stream(unsigned max)
{
    unsigned now = streams_.load(std::memory_order_relaxed);
    while (now < max)
        if (streams_.compare_exchange_weak(now, now + 1, std::memory_order_relaxed))
            return true;
    refused_.fetch_add(1, std::memory_order_relaxed);
    return false;
}

void Counters::format(std::string &out) const
{
    family(out, "ferry_http_compressed_responses_total", "counter",
           "PHP responses compressed (http.middleware: gzip), by Content-Encoding.");
    sample(out, "ferry_http_compressed_responses_total", "encoding=\"gzip\"",
           static_cast<double>(responses_[0].load(std::memory_order_relaxed)));
    sample(out, "ferry_http_compressed_responses_total", "encoding=\"br\"",
           static_cast<double>(responses_[1].load(std::memory_order_relaxed)));
    family(out, "ferry_http_compression_bytes_total", "counter",
           "Bytes of compressed responses before (stage=\"in\") and after (stage=\"out\") compression.");
    sample(out, "ferry_http_compression_bytes_total", "stage=\"in\"",
           static_cast<double>(in_.load(std::memory_order_relaxed)));
    sample(out, "ferry_http_compression_bytes_total", "stage=\"out\"",
           static_cast<double>(out_.load(std::memory_order_relaxed)));
    family(out, "ferry_http_compression_streams", "gauge",
           "Streamed responses being compressed now (http.compression.max_streams caps them).");
    sample(out, "ferry_http_compression_streams", "", static_cast<double>(streams()));
    family(out, "ferry_http_compression_streams_refused_total", "counter",
           "Streamed responses sent uncompressed because max_streams were being compressed.");
    sample(out, "ferry_http_compression_streams_refused_total", "",
           static_cast<double>(refused_.load(std::memory_order_relaxed)));
    family(out, "ferry_static_compressed_bytes", "gauge",
           "Static files compressed on the fly and kept, all loops (http.static.compress_cache).");
    sample(out, "ferry_static_compressed_bytes", "",
           static_cast<double>(static_bytes_.load(std::memory_order_relaxed)));
}

} // namespace ferry::server::detail::compress
