// Which PHP responses are compressed, and how (internal to server/): the rules of nginx's gzip filter and
// RoadRunner's gzip middleware, configured by http.compression (docs/compression.md), and the counters
// /metrics shows.
#pragma once

#include "encoder.hpp"

#include "ferry/conf/config.hpp"
#include "ferry/relay/context.hpp"
#include "ferry/server/http_parser.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace ferry::server::detail::compress {

struct Plan {
    Coding coding = Coding::identity;
    bool vary = false; // the answer depends on Accept-Encoding: say so (Vary), compressed or not
};

// For the final response `rc` (status `status`) to `req`: `whole_size` is the body's length, nullopt for a
// stream. Compressed when "gzip" is in http.middleware, the request is not HEAD, the status has a body and is
// not 206, the response has no Content-Encoding, Content-Range or `Cache-Control: no-transform`, its media
// type is one of `types`, a whole body is at least `min_length`, and the client accepts gzip or br (br when
// brotli is on and the client ranks it above gzip, or as high and `prefer` is br).
Plan plan(const conf::CompressionConfig &config, const Request &req, const relay::ResponseContext &rc,
          int status, std::optional<std::size_t> whole_size);

// The coding for a client's Accept-Encoding (`accept`) under `config`'s brotli and prefer: identity when it
// accepts neither gzip nor br.
Coding choose(const conf::CompressionConfig &config, std::string_view accept);

// Whether `content_type` (a Content-Type value, parameters ignored) is one of `types` ("text/*" matches the
// whole type), case-insensitively.
bool type_listed(const std::vector<std::string> &types, std::string_view content_type);

// Server-wide: /metrics' ferry_http_compressed_*, and the cap on streams being compressed at once.
class Counters {
public:
    // A response compressed: its bytes before and after.
    void compressed(Coding c, std::uint64_t in, std::uint64_t out)
    {
        responses_[c == Coding::br ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
        in_.fetch_add(in, std::memory_order_relaxed);
        out_.fetch_add(out, std::memory_order_relaxed);
    }
    // A stream's encoder taken (false past http.compression.max_streams: the stream goes uncompressed) and
    // given back.
    bool take_stream(unsigned max);
    void give_stream() { streams_.fetch_sub(1, std::memory_order_relaxed); }
    unsigned streams() const { return streams_.load(std::memory_order_relaxed); }

    // Compressed static files held by the loops' caches (http.static.compress).
    void static_cached(std::int64_t delta) { static_bytes_.fetch_add(delta, std::memory_order_relaxed); }

    // ferry_http_compressed_responses_total{encoding}, ferry_http_compression_bytes_total{stage},
    // ferry_http_compression_streams, ferry_http_compression_streams_refused_total,
    // ferry_static_compressed_bytes.
    void format(std::string &out) const;

private:
    std::array<std::atomic<std::uint64_t>, 2> responses_{}; // gzip, br
    std::atomic<std::uint64_t> in_{0}, out_{0}, refused_{0};
    std::atomic<unsigned> streams_{0};
    std::atomic<std::int64_t> static_bytes_{0};
};

} // namespace ferry::server::detail::compress
