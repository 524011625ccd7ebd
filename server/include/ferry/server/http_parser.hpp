// HTTP/1.1 request parser over llhttp that owns its input buffer (design §4). No llhttp type leaks here.
#pragma once

#include "ferry/server/http_grammar.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::server {

class ChunkedDecoder;

// Where the parser puts request body bytes (the server's spills large bodies to a file). Without one, they
// go to Request::body.
class BodySink {
public:
    virtual ~BodySink() = default;
    // A body begins; `expected` is its Content-Length (0 when chunked or unknown).
    virtual void begin(std::uint64_t expected) = 0;
    // Returns 0, or the HTTP status to answer (with `error` saying why) when the bytes cannot be kept.
    virtual int write(std::string_view bytes, std::string &error) = 0;
};

struct Limits {
    std::size_t max_request_line = 8 * 1024;  // request line alone: 414 beyond it
    std::size_t max_header_size = 64 * 1024;  // request line + headers: 431 beyond it
    std::uint64_t max_body_size = 1ull << 30; // decoded body
    std::size_t max_headers = 256;
};

struct Request {
    std::string method;
    std::string target; // as received: /path?query (origin-form) or http://host/path (absolute-form)
    TargetForm form = TargetForm::origin;
    std::string authority; // absolute-form: host[:port] from the target, which replaces Host
    int version_major = 1;
    int version_minor = 1;
    std::vector<std::pair<std::string, std::string>> headers; // names as received, in order
    std::string body;                                         // without a BodySink
    bool keep_alive = true;
    bool expect_continue = false;
    bool upgrade = false; // Upgrade/CONNECT: served as a plain request, then the connection closes
    bool chunked = false;
    std::string_view header(std::string_view name) const; // first value, case-insensitive; "" if absent
};

class HttpParser {
public:
    enum class Event {
        need_more, // read more bytes into prepare(), then commit()
        headers,   // headers complete, body pending, client expects "100 Continue" (reported once)
        request,   // request() is complete; call done() after answering it
        error,     // error_status() / error_message(); answer and close
    };

    explicit HttpParser(const Limits &limits, BodySink *body = nullptr);
    ~HttpParser();
    HttpParser(const HttpParser &) = delete;
    HttpParser &operator=(const HttpParser &) = delete;

    std::span<char> prepare(std::size_t min_free = 4096);
    void commit(std::size_t n);
    Event next();
    const Request &request() const { return req_; }
    Request &request() { return req_; }
    void done();

    int error_status() const { return err_status_; }
    const std::string &error_message() const { return err_msg_; }
    bool idle() const;         // no byte of an unfinished request is buffered
    bool has_buffered() const; // unparsed bytes remain (a pipelined request, maybe)
    bool in_body() const { return headers_done_ && !complete_; }
    std::size_t buffer_capacity() const { return buf_.size(); }
    // Between requests: gives back what a large request made it hold (header strings, buffer growth).
    void release_memory();
    std::size_t last_head_size() const { return last_head_size_; } // bytes of the last request's head

    struct Callbacks;

private:
    struct Span {
        std::uint32_t off = 0, len = 0;
    };
    struct HeaderSpan {
        Span name, value;
    };

    void reset_message();
    void compact(std::size_t keep_from);
    int fail(int status, std::string message);
    // Strict checks llhttp 8.1 does not make (it predates the bare-CR fix of CVE-2023-30589): every line
    // of the head ends in CRLF, no bare CR or LF, no control byte but HTAB, no obs-fold, and the request
    // line is exactly `token SP target SP HTTP/1.x`. Runs over the head before llhttp sees it.
    bool scan_head();
    bool check_request_line(std::size_t from, std::size_t to);
    void start_scan(std::size_t at);
    // The body is framed here, not by llhttp (it parses the head only): Content-Length bytes, or
    // ChunkedDecoder. Returns false on an error.
    bool read_body();

    bool keep_body(std::string_view bytes);

    struct LL;
    std::unique_ptr<LL> ll_;
    Limits limits_;
    BodySink *body_sink_;
    // The receive buffer. Not std::vector: that would zero (and so touch) every byte of every idle
    // connection's buffer; here only what recv() writes is ever touched.
    class Buffer {
    public:
        explicit Buffer(std::size_t n) : data_(new char[n]), size_(n) {}
        char *data() { return data_.get(); }
        const char *data() const { return data_.get(); }
        std::size_t size() const { return size_; }
        // New size n, keeping the first `keep` bytes; the rest is uninitialised.
        void reallocate(std::size_t n, std::size_t keep);

    private:
        std::unique_ptr<char[]> data_;
        std::size_t size_;
    };
    Buffer buf_;
    std::size_t parsed_ = 0, end_ = 0, msg_start_ = 0, feed_start_ = 0;
    bool in_message_ = false, headers_done_ = false, complete_ = false, continue_reported_ = false;
    bool last_was_value_ = false, paused_ = false;
    std::size_t head_bytes_ = 0, last_head_size_ = 0;
    // scan_head() state: offsets into buf_ (shifted by compact()).
    std::size_t scan_pos_ = 0, line_start_ = 0, head_end_ = 0;
    bool scan_cr_ = false, head_scanned_ = false, request_line_seen_ = false;
    // Body framing of the current request.
    enum class BodyKind { none, length, chunked } body_kind_ = BodyKind::none;
    std::uint64_t body_left_ = 0;
    std::unique_ptr<ChunkedDecoder> chunked_; // created on the first chunked request
    Span url_;
    std::vector<HeaderSpan> spans_;
    std::string valid_host_; // the last Host value found valid on this connection
    Request req_;
    int err_status_ = 0;
    std::string err_msg_;
};

} // namespace ferry::server
