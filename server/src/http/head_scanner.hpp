// The strict checks of a request head that llhttp 8.1 does not make (it predates the bare-CR fix of
// CVE-2023-30589): every line ends in CRLF, no bare CR or LF, no control byte but HTAB, no obs-fold, and the
// request line is exactly `token SP target SP HTTP/1.x`, the head fits max_header_size (docs/architecture.md,
// "HTTP front end"). Its checks run byte by byte in stream order, so the first failure is the same however
// the reads split.
// Internal to server/: the parser runs it over the head before llhttp sees a byte of it.
#pragma once

#include "ferry/server/http_parser.hpp"

#include <cstddef>

namespace ferry::server::detail {

class HeadScanner {
public:
    // A new head starts at offset `at` of the parser's buffer.
    void start(std::size_t at);
    // Scans buf[..size) from where the last call stopped. A failure carries the status to answer.
    HttpResult<void> scan(const char *buf, std::size_t size, const Limits &limits);
    bool done() const { return done_; }
    // llhttp may be fed up to here: the end of the head once done, else the start of the unfinished line
    // (after a failure: of the line that failed).
    std::size_t checked_end() const { return done_ ? head_end_ : line_start_; }
    // The buffer's bytes moved down by `by` (the parser compacted it).
    void shift(std::size_t by);

private:
    std::size_t pos_ = 0, line_start_ = 0, head_start_ = 0, head_end_ = 0; // head_start_: the request line
    bool cr_ = false, done_ = false, request_line_seen_ = false;
};

} // namespace ferry::server::detail
