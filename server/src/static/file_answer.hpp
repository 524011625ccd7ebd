// Answering a GET or HEAD with a file (internal to server/): the conditional headers (If-None-Match,
// If-Modified-Since: 304), one byte range (Range, If-Range: 206 or 416) and the bytes by sendfile(2). Shared
// by the static files handler and the PHP handler's X-Sendfile (http.middleware: "sendfile").
#pragma once

#include "../handlers/handler.hpp"
#include "../http/response.hpp"

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>

namespace ferry::server::detail {

struct FileAnswer {
    int fd = -1; // open for reading; the caller keeps it open until the answer is sent
    std::uint64_t size = 0;
    std::time_t mtime = 0;     // If-Modified-Since, If-Range with a date
    std::string_view etag;     // If-None-Match, If-Range with an entity tag ("" : none)
    std::string_view log_name; // "static", "http": whose log line a file that shrank while sent gets
    // Bytes to send instead of the file's (a compressed copy: http.static.compress); no ranges then.
    const std::string *data = nullptr;
};

// Answers ex.request with the file. `h` is the head so far (keep-alive, HTTP/1.0, the content type or the
// worker's headers); `extra` holds the header lines to send with every answer (Last-Modified, ETag,
// Cache-Control...), to which Accept-Ranges and Content-Range are appended here. Only a status of 200 is
// subject to Range; another status sends the whole file as it is.
awaitable<After> answer_with_file(Exchange &ex, const FileAnswer &f, Head h, std::string &extra);

} // namespace ferry::server::detail
