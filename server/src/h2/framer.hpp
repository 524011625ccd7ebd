// HTTP/1.1 response bytes, as Ferry's handlers write them (http/response.hpp), read back into what HTTP/2
// sends: a head (status and header fields), body bytes, the end (internal to server/). Handlers serialise
// every answer once, as HTTP/1.1; an HTTP/2 stream (h2/stream.hpp) passes their bytes through this, as
// Apache's mod_http2 does (h2_from_h1). The input is our own serialiser's, so anything unexpected is a bug,
// reported as an error (the stream is reset), never guessed at.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::server::detail::h2 {

class Framer {
public:
    struct Head {
        int status = 0;
        // Lower-case names (HTTP/2's rule); hop-by-hop fields (Connection, Keep-Alive, Transfer-Encoding,
        // Upgrade, Proxy-Connection) left out.
        std::vector<std::pair<std::string, std::string>> fields;
        bool body = false; // a final head after which body bytes may come (else the response ends with it)
    };
    class Sink {
    public:
        virtual ~Sink() = default;
        virtual void on_head(Head &head) = 0; // a 1xx (informational) or the final head
        virtual void on_data(std::string_view bytes) = 0;
        // Trailer fields after a chunked body (lower-case names), just before on_end.
        virtual void on_trailers(std::vector<std::pair<std::string, std::string>> &fields) = 0;
        virtual void on_end() = 0; // the final response is complete
    };

    // `head_request`: the request was HEAD, so a final head is never followed by a body (set before feed).
    void set_head_request(bool yes) { head_request_ = yes; }

    // Reads the next bytes; false on input that is not a response (error() says why).
    bool feed(std::string_view in, Sink &sink);
    // Body bytes that the caller sends itself (a file read straight into DATA frames): whether `n` of them
    // fit here (a body by length, or until the end; not chunked), and counting them as sent.
    bool can_skip(std::uint64_t n) const
    {
        return (state_ == State::length && n <= left_) || state_ == State::until_end;
    }
    void skip(std::uint64_t n, Sink &sink);
    // The response so far is complete (on_end was called).
    bool done() const { return state_ == State::done; }
    // A head has gone out (the final one or a 1xx).
    bool started() const { return started_; }
    // The final head had no length: the body runs until its writer ends.
    bool until_end() const { return state_ == State::until_end; }
    const std::string &error() const { return error_; }

private:
    enum class State { head, length, chunk_size, chunk_data, chunk_crlf, trailers, until_end, done, failed };
    bool fail(std::string why);
    bool parse_head(std::string_view head, Sink &sink);
    // Up to left_ body bytes from the front of `in` to the sink: true when left_ reached 0.
    bool take_body(std::string_view &in, Sink &sink);

    State state_ = State::head;
    bool head_request_ = false;
    bool started_ = false;
    std::string line_; // a head or a chunk-size line split across writes
    std::uint64_t left_ = 0;
    std::vector<std::pair<std::string, std::string>> trailers_;
    std::string error_;
};

} // namespace ferry::server::detail::h2
