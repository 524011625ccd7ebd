// Serialising HTTP/1.1 responses (internal to server/).
#pragma once

#include "ferry/relay/context.hpp"

#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail {

std::string_view reason_phrase(int status);

// "Sun, 06 Nov 1994 08:49:37 GMT", recomputed at most once a second.
std::string_view http_date();
// The IMF-fixdate of `t` (Last-Modified and friends); writes at most 29 bytes plus NUL into `buf`.
std::size_t format_http_date(std::time_t t, char (&buf)[64]);

enum class Framing {
    length,  // Content-Length: content_length
    chunked, // Transfer-Encoding: chunked
    close,   // body until the connection closes (HTTP/1.0 streaming)
    none,    // 1xx, 204, 304: no body, no length
};

struct Head {
    int status = 200;
    const relay::ResponseContext *worker = nullptr; // headers from PHP (may be null)
    std::string_view content_type;                  // used when `worker` is null
    std::string_view extra; // more header lines, each "Name: value\r\n", already valid
    // Worker headers the response's own kind keeps for itself (a 101's handshake headers): left out.
    bool (*reserved)(std::string_view name) = nullptr;
    // Worker headers sent as trailers instead (named in its Trailer header: RoadRunner's rule): left out.
    const std::vector<std::string> *trailers = nullptr;
    // Compression (compress/policy.hpp): "Content-Encoding: <content_encoding>" when set, strong worker ETags
    // sent weak (W/), and "Vary: Accept-Encoding" unless a worker Vary already names it (or is "*").
    std::string_view content_encoding;
    bool vary_accept_encoding = false;
    Framing framing = Framing::length;
    std::size_t content_length = 0;
    bool keep_alive = true;
    bool http10 = false; // add "Connection: keep-alive" when keeping alive
};

// Appends status line + headers + CRLF. Worker headers with an invalid name or a value containing
// CR, LF or NUL are dropped (and counted in `dropped`); hop-by-hop headers the server owns
// (Content-Length, Transfer-Encoding, Connection) are replaced by its own.
void append_head(std::string &out, const Head &head, int *dropped = nullptr);

// A plain-text response (Connection: close when !keep_alive); `extra`: more header lines, already valid. A
// 503 gets its Retry-After from append_head().
void append_text(std::string &out, int status, std::string_view body, bool keep_alive, bool head_request,
                 std::string_view extra = {});
// A short plain-text error response: "<status> <reason>[: detail]".
void append_error(std::string &out, int status, std::string_view detail, bool keep_alive, bool head_request,
                  std::string_view extra = {});

bool no_body_status(int status);

// Trailers (RoadRunner's rule, as Go's net/http): a worker header named in the response's Trailer header is
// sent after the body — HTTP/1.1: in the chunked body's trailer section; HTTP/2: a trailing HEADERS frame.
std::vector<std::string> declared_trailers(const relay::ResponseContext &rc);
bool declares_trailers(const relay::ResponseContext &rc); // has a Trailer header (no allocation)
bool names_trailer(const std::vector<std::string> &names, std::string_view name);
// "Name: value\r\n" for each worker header in `names` (valid ones only).
std::string trailer_lines(const relay::ResponseContext &rc, const std::vector<std::string> &names);

} // namespace ferry::server::detail
