// HTTP/1.1 request parser over llhttp that owns its input buffer (docs/architecture.md, "HTTP front end").
// No llhttp type leaks here.
#pragma once

#include "ferry/base/budget.hpp"
#include "ferry/server/http_grammar.hpp"

#include <boost/system/result.hpp>

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

// A failure to be answered to the client: the status, and why in words for the log (and, for a 4xx, the
// response body). The HTTP form of the project's error convention (ferry/base/result.hpp).
struct HttpError {
    int status = 0;
    std::string message;
};
[[noreturn]] void throw_exception_from_error(const HttpError &e, const boost::source_location &where);
template <typename T = void> using HttpResult = boost::system::result<T, HttpError>;

// Where the parser puts a request's body bytes, chosen per request by the handler that serves it (a
// buffer that spills to a temp file, an upload parser...). Without one, they go to Request::body.
class BodySink {
public:
    virtual ~BodySink() = default;
    // A body begins (called before its first byte); `expected` is its Content-Length (0 when chunked).
    virtual void begin(std::uint64_t expected) = 0;
    // Keeps the next bytes, or fails with the status to answer.
    virtual HttpResult<void> write(std::string_view bytes) = 0;
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
    bool upgrade =
        false; // Upgrade header: closes after the answer unless a handler takes the connection over
    bool chunked = false;
    std::string_view header(std::string_view name) const; // first value, case-insensitive; "" if absent
    bool http10() const { return version_major == 1 && version_minor == 0; } // (HTTP/2 is 2.0)
};

class HttpParser {
public:
    enum class Event {
        need_more, // read more bytes into prepare(), then commit()
        head,      // request() has its head, not yet its body: pick where the body goes (reported once)
        request,   // request() is complete; call done() after answering it
        error,     // error_status() / error_message(); answer and close
    };

    explicit HttpParser(const Limits &limits);
    ~HttpParser();
    HttpParser(const HttpParser &) = delete;
    HttpParser &operator=(const HttpParser &) = delete;

    std::span<char> prepare(std::size_t min_free = 4096);
    // The receive buffer beyond its first initial_buffer bytes (a large head, pipelined requests) takes from
    // `budget` (http.limits.max_head_memory, all connections): when it cannot, next() fails with 503
    // (buffer_refused()). nullptr: no budget.
    void set_buffer_budget(Budget *budget) { budget_ = budget; }
    bool buffer_refused() const { return buffer_refused_; }
    void commit(std::size_t n);
    Event next();
    const Request &request() const { return req_; }
    Request &request() { return req_; }
    void done();
    // At Event::head: the body of this request goes to `sink` (nullptr: to Request::body).
    void set_body_sink(BodySink *sink) { body_sink_ = sink; }
    // At Event::request: hands over the bytes received after this request (a protocol switch takes them),
    // which the parser then forgets.
    std::string_view take_buffered();
    // The bytes received and not yet parsed, left where they are.
    std::string_view peek_buffered() const { return {buf_.data() + parsed_, end_ - parsed_}; }

    int error_status() const { return err_status_; }
    const std::string &error_message() const { return err_msg_; }
    bool idle() const;         // no byte of an unfinished request is buffered
    bool has_buffered() const; // unparsed bytes remain (a pipelined request, maybe)
    bool in_body() const { return headers_done_ && !complete_; }
    std::size_t buffer_capacity() const { return buf_.size(); }
    // After done() on a request that does not keep the connection alive (request().keep_alive false), the
    // parser reads no further request: later bytes are dropped by next() (has_buffered() still tells the
    // caller they came, to drain them before closing), so no pipelined bytes are ever judged.
    bool closed() const { return closed_; }
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
    // Room for `min_free` more bytes: compacts, then grows the buffer (from the budget). False when the
    // budget has not the bytes.
    bool make_room(std::size_t min_free);
    // Reallocates the buffer to n bytes keeping the first `keep`, its growth held from the budget. False
    // (nothing changed) when the budget cannot give it.
    bool resize(std::size_t n, std::size_t keep);
    void refuse_buffer(); // the budget said no: 503 (buffer_refused())
    int fail(int status, std::string message);
    Event parse_head();
    Event feed_head(std::size_t feed_end); // llhttp gets the checked head bytes up to feed_end
    // The body is framed here, not by llhttp (it parses the head only): Content-Length bytes, or
    // ChunkedDecoder. Returns false on an error.
    bool read_body();

    bool keep_body(std::string_view bytes);

    struct LL; // llhttp's state and the head scanner (http/head_scanner.hpp)
    std::unique_ptr<LL> ll_;
    Limits limits_;
    BodySink *body_sink_ = nullptr;
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
    Budget *budget_ = nullptr;
    Reservation held_; // buf_.size() - initial_buffer bytes of budget_
    bool buffer_refused_ = false;
    std::size_t parsed_ = 0, end_ = 0, msg_start_ = 0, feed_start_ = 0;
    bool in_message_ = false, headers_done_ = false, complete_ = false, head_reported_ = false;
    bool body_begun_ = false, last_was_value_ = false, paused_ = false;
    // The last request does not keep the connection (HTTP/1.0 without keep-alive, Connection: close, an
    // upgrade): once it is done(), the parser is closed and drops whatever bytes come after it.
    bool last_closes_ = false, closed_ = false;
    std::size_t head_bytes_ = 0, last_head_size_ = 0;
    // Body framing of the current request.
    enum class BodyKind { none, length, chunked } body_kind_ = BodyKind::none;
    std::uint64_t body_left_ = 0, body_length_ = 0;
    std::unique_ptr<ChunkedDecoder> chunked_; // created on the first chunked request
    Span url_;
    std::vector<HeaderSpan> spans_;
    std::string valid_host_; // the last Host value found valid on this connection
    Request req_;
    int err_status_ = 0;
    std::string err_msg_;
};

} // namespace ferry::server
