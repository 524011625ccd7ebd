// Strict decoder for the chunked transfer coding of request bodies (RFC 9112 §7.1).
//
// Why not llhttp's: Debian's llhttp 8.1.0 predates the bare-CR fix (CVE-2023-30589) and rejects valid
// quoted-string chunk extensions (`5;a="q"`). This decoder requires CRLF everywhere, accepts the full
// chunk-ext grammar (whitespace only before a ";" or "=" that follows it: "5 \r\n" is a 400), refuses a chunk
// larger than the body limit as soon as its size line ends (413, before its data arrives), and validates and
// drops trailers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::server {

class ChunkedDecoder {
public:
    struct Limits {
        std::uint64_t max_body = 1ull << 30;  // decoded bytes in all chunks: 413 beyond
        std::size_t max_size_line = 4096;     // chunk-size line with its extensions: 400 beyond
        std::size_t max_trailers = 64 * 1024; // all trailer lines: 431 beyond
    };

    struct Step {
        std::size_t used = 0;  // bytes of the input consumed by this step
        std::string_view data; // decoded body bytes (a part of the input), possibly empty
    };

    ChunkedDecoder() = default;
    explicit ChunkedDecoder(Limits limits) : limits_(limits) {}

    // Consumes a prefix of `in`: either framing or one run of data. Call again with the rest until the
    // input is used up, done() or failed().
    Step step(std::string_view in);
    bool done() const { return state_ == State::done; }
    bool failed() const { return status_ != 0; }
    int error_status() const { return status_; }
    const std::string &error_message() const { return message_; }
    std::uint64_t body_size() const { return total_; }
    void reset();

private:
    enum class State {
        size,         // hex digits
        size_bws,     // BWS after the size: a ";" must follow
        ext_pre_name, // after ";": BWS then a token
        ext_name,
        ext_post_name, // BWS, then "=" or ";"
        ext_pre_value, // after "=": BWS then token or quoted-string
        ext_token,
        ext_quoted,
        ext_escape,
        ext_quoted_end, // right after the closing quote: CR, ";" or BWS
        ext_post_value, // BWS, then ";"
        size_lf,        // after the CR of the size line
        data,
        data_cr,
        data_lf,
        trailer_start, // start of a trailer line, or the final CRLF
        trailer_name,
        trailer_value,
        trailer_lf,
        final_lf,
        done,
    };

    bool fail(int status, std::string message);
    bool size_line_char(unsigned char c);
    bool end_size_line();

    Limits limits_;
    State state_ = State::size;
    std::uint64_t chunk_ = 0, left_ = 0, total_ = 0;
    unsigned digits_ = 0; // significant hex digits of the size
    bool any_digit_ = false;
    std::size_t line_ = 0, trailers_ = 0;
    int status_ = 0;
    std::string message_;
};

} // namespace ferry::server
