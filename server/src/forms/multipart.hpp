// multipart/form-data (RFC 7578) parsed as it arrives (internal to server/): parts are reported as they
// start, their bytes as they come and their end, so a file part can go to disk without the body ever being
// held whole. Boundaries split across reads, a missing final boundary, oversized part headers and too many
// parts are handled here; what a part becomes (a field, an uploaded file) is the handler's business.
#pragma once

#include "ferry/server/http_parser.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::server::detail {

struct PartHeaders {
    std::string name;                    // Content-Disposition's name
    std::optional<std::string> filename; // its filename, as sent (a path is the handler's to strip)
    std::string content_type;            // "" when absent
};

class MultipartHandler {
public:
    virtual ~MultipartHandler() = default;
    virtual HttpResult<void> part_begin(const PartHeaders &headers) = 0;
    virtual HttpResult<void> part_data(std::string_view bytes) = 0;
    virtual HttpResult<void> part_end() = 0;
};

class MultipartParser {
public:
    struct Limits {
        std::size_t max_part_header = 16 * 1024; // the header block of one part (400 beyond)
        std::size_t max_parts = 1000;            // parts in one body (400 beyond)
    };

    // The boundary parameter of a multipart/form-data Content-Type (quoted or not, 1 to 70 characters), or
    // nullopt when the type is not multipart/form-data or the boundary is missing or invalid.
    static std::optional<std::string> boundary_of(std::string_view content_type);
    static bool is_multipart(std::string_view content_type);

    MultipartParser(std::string_view boundary, Limits limits, MultipartHandler &handler);
    // A new body with this boundary.
    void reset(std::string_view boundary);

    // The next bytes of the body. A failure (malformed body, a limit, or the handler's) is final.
    HttpResult<void> feed(std::string_view bytes);
    // The body ended: fails unless the final boundary was seen.
    HttpResult<void> finish();

private:
    enum class State { preamble, after_delimiter, headers, body, done };
    HttpResult<void> step(bool &progress);
    HttpResult<void> parse_headers(std::string_view block);

    std::string delimiter_; // CRLF "--" boundary
    Limits limits_;
    MultipartHandler &handler_;
    State state_ = State::preamble;
    std::string buf_; // bytes received and not consumed yet (a tail that may start a delimiter)
    std::size_t parts_ = 0;
    PartHeaders part_;
};

} // namespace ferry::server::detail
