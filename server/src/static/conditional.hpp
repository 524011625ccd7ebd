// Request headers a static response depends on (internal to server/): HTTP dates, entity tags,
// If-None-Match, Range and Accept-Encoding (RFC 9110 §8.8, §13, §14, §12.5.3), as pure functions.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string_view>

namespace ferry::server::detail {

// An HTTP-date in any of its three forms (IMF-fixdate, RFC 850, asctime); nullopt if none.
std::optional<std::time_t> parse_http_date(std::string_view s);

// If-None-Match against the file's ETag: weak comparison, "*" matches any.
bool none_match_hits(std::string_view if_none_match, std::string_view etag);

// Strong comparison (If-Range): equal, and neither weak.
bool strong_etag_equal(std::string_view a, std::string_view b);

struct ByteRange {
    enum class Kind { none, satisfiable, unsatisfiable };
    Kind kind = Kind::none; // none: absent, malformed or several ranges: send the whole file
    std::uint64_t first = 0, length = 0;
};
// One range of "bytes=a-b", "bytes=a-" or "bytes=-n" against a file of `size` bytes.
ByteRange parse_range(std::string_view range, std::uint64_t size);

// The q-value the client gives `coding` ("br", "gzip") in Accept-Encoding; "*" counts; 0 when absent.
double accept_encoding_q(std::string_view accept_encoding, std::string_view coding);

} // namespace ferry::server::detail
