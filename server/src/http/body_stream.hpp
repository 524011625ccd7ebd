// A response whose body goes out as it is produced (internal to server/): chunked to HTTP/1.1 clients,
// until the close to HTTP/1.0 ones. PHP's streamed responses use it; any handler may (server-sent events).
#pragma once

#include "response.hpp"

#include "compress/encoder.hpp"

#include "ferry/base/io.hpp"
#include "ferry/server/http_parser.hpp"

#include <string>
#include <string_view>

namespace ferry::server::detail {

class Wire;

class BodyStream {
public:
    // `out`: the connection's pending output, written before the first piece.
    BodyStream(Wire &transport, std::string &out, const Request &req);

    // A 1xx response before the final one (dropped for HTTP/1.0 clients, and once the final one started),
    // with the worker's headers. Scalars only: GCC 12 miscompiles a coroutine taking Head by value.
    awaitable<bool> informational(int status, const relay::ResponseContext *headers);
    // The final response's head: framing none for statuses without a body, until-close for HTTP/1.0 (which
    // then cannot keep the connection), chunked otherwise. Goes out with the first write().
    void start(Head head);
    // Trailer lines ("Name: value\r\n") sent after the last chunk (HTTP/1.1 chunked only; else dropped).
    void set_trailers(std::string lines) { trailer_fields_ = std::move(lines); }
    // The body goes through `encoder` (set before the first write; the head says its Content-Encoding): each
    // write is compressed in slices of compress::slice_size, the loop served between them, and flushed at its
    // end, so what the worker flushed reaches the client decodable.
    void set_encoder(compress::Encoder *encoder) { encoder_ = encoder; }
    // The next piece of body (nothing for HEAD, 204, 304); `last` ends it. False when the client is gone.
    awaitable<bool> write(std::string_view body, bool last);
    // Bytes of body handed to write() and bytes that went out after the encoder.
    std::uint64_t bytes_in() const { return bytes_in_; }
    std::uint64_t bytes_out() const { return bytes_out_; }

    bool started() const { return started_; }
    bool failed() const { return failed_; }
    bool keep_alive() const { return keep_alive_; } // as start() decided it
    int status() const { return status_; }

private:
    awaitable<bool> write_piece(std::string_view body, bool last);
    awaitable<bool> write_encoded(std::string_view body, bool last);

    Wire &transport_;
    std::string &out_;
    bool head_request_, http10_;
    bool started_ = false, failed_ = false, chunked_ = false, send_body_ = true, keep_alive_ = true;
    int status_ = 200;
    std::string trailer_;
    std::string trailer_fields_;
    compress::Encoder *encoder_ = nullptr;
    std::string encoded_;
    std::uint64_t bytes_in_ = 0, bytes_out_ = 0;
};

} // namespace ferry::server::detail
