#include "ferry/server/http_parser.hpp"

#include "chunked_decoder.hpp"
#include "ferry/base/text.hpp"
#include "head_rules.hpp"
#include "head_scanner.hpp"

#include <llhttp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace ferry::server {

namespace {
using ferry::printable;
constexpr std::size_t initial_buffer = 8192;

} // namespace

void throw_exception_from_error(const HttpError &e, const boost::source_location &where)
{
    throw std::logic_error(std::string("value() of a failed HttpResult (") + where.file_name() + ":" +
                           std::to_string(where.line()) + "): " + e.message);
}

std::string_view Request::header(std::string_view name) const
{
    for (const auto &[n, v] : headers)
        if (iequals(n, name))
            return v;
    return {};
}

struct HttpParser::LL {
    llhttp_t parser;
    llhttp_settings_t settings;
    detail::HeadScanner scanner;
};

// llhttp callbacks never throw: they record the problem and return an error code.
struct HttpParser::Callbacks {
    static HttpParser &self(llhttp_t *p) { return *static_cast<HttpParser *>(p->data); }

    static std::uint32_t offset(HttpParser &s, const char *at)
    {
        return static_cast<std::uint32_t>(at - s.buf_.data());
    }

    static int count_head(HttpParser &s, std::size_t len)
    {
        s.head_bytes_ += len;
        if (s.head_bytes_ > s.limits_.max_header_size)
            return s.fail(431, "request header larger than " + std::to_string(s.limits_.max_header_size) +
                                   " bytes");
        return 0;
    }

    static int on_message_begin(llhttp_t *p)
    {
        auto &s = self(p);
        s.reset_message();
        s.in_message_ = true;
        s.msg_start_ = s.feed_start_;
        return 0;
    }

    static int on_url(llhttp_t *p, const char *at, std::size_t len)
    {
        auto &s = self(p);
        if (s.url_.len == 0)
            s.url_.off = offset(s, at);
        s.url_.len += static_cast<std::uint32_t>(len);
        return count_head(s, len);
    }

    static int on_header_field(llhttp_t *p, const char *at, std::size_t len)
    {
        auto &s = self(p);
        if (s.headers_done_)
            return 0; // chunked trailers: dropped (their bytes are not kept)
        if (s.spans_.empty() || s.last_was_value_) {
            if (s.spans_.size() >= s.limits_.max_headers)
                return s.fail(431, "more than " + std::to_string(s.limits_.max_headers) + " request headers");
            s.spans_.push_back(HeaderSpan{{offset(s, at), 0}, {}});
            s.last_was_value_ = false;
        }
        s.spans_.back().name.len += static_cast<std::uint32_t>(len);
        return count_head(s, len + 4); // ": " and CRLF
    }

    static int on_header_value(llhttp_t *p, const char *at, std::size_t len)
    {
        auto &s = self(p);
        if (s.headers_done_)
            return 0;
        auto &v = s.spans_.back().value;
        if (!s.last_was_value_) {
            v.off = offset(s, at);
            v.len = 0;
            s.last_was_value_ = true;
        } else if (v.off + v.len != offset(s, at)) {
            // A value continued elsewhere in the buffer: obsolete line folding (RFC 9112 §5.2 allows 400).
            return s.fail(400, "obsolete line folding in a header value");
        }
        v.len += static_cast<std::uint32_t>(len);
        return count_head(s, len);
    }

    static int on_headers_complete(llhttp_t *p)
    {
        auto &s = self(p);
        auto &r = s.req_;
        s.headers_done_ = true;
        s.last_head_size_ = s.head_bytes_;
        const char *b = s.buf_.data();
        r.method = llhttp_method_name(static_cast<llhttp_method_t>(p->method));
        r.target.assign(b + s.url_.off, s.url_.len);
        r.version_major = p->http_major;
        r.version_minor = p->http_minor;
        // Entries are assigned in place: their strings keep their capacity from one request to the next.
        r.headers.resize(s.spans_.size());
        for (std::size_t i = 0; i < s.spans_.size(); ++i) {
            const auto &h = s.spans_[i];
            std::string_view name(b + h.name.off, h.name.len);
            if (!is_token(name))
                return s.fail(400, "invalid header name \"" + std::string(name.substr(0, 64)) + "\"");
            std::string_view value(b + h.value.off, h.value.len);
            while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
                value.remove_suffix(1);
            r.headers[i].first.assign(name);
            r.headers[i].second.assign(value);
        }
        r.keep_alive = llhttp_should_keep_alive(p) != 0;
        r.upgrade = p->upgrade != 0;
        if (r.upgrade)
            r.keep_alive = false; // after the answer, unless a handler takes the connection over
        s.last_closes_ = !r.keep_alive;
        r.chunked = (p->flags & F_CHUNKED) != 0;
        if (auto checked = detail::check_head(r, s.valid_host_); !checked)
            return s.fail(checked.error().status, std::move(checked.error().message));
        if ((p->flags & F_CONTENT_LENGTH) && p->content_length > s.limits_.max_body_size)
            return s.fail(413, "request body of " + std::to_string(p->content_length) +
                                   " bytes is larger than max_request_size (" +
                                   std::to_string(s.limits_.max_body_size) + " bytes)");
        if (r.chunked) {
            s.body_kind_ = BodyKind::chunked;
            ChunkedDecoder::Limits cl;
            cl.max_body = s.limits_.max_body_size;
            cl.max_trailers = s.limits_.max_header_size;
            if (!s.chunked_)
                s.chunked_ = std::make_unique<ChunkedDecoder>(cl);
            else
                s.chunked_->reset();
        } else if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0) {
            s.body_kind_ = BodyKind::length;
            s.body_left_ = s.body_length_ = p->content_length;
        } else {
            s.body_kind_ = BodyKind::none;
        }
        if (s.body_kind_ != BodyKind::none && p->http_minor >= 1 &&
            iequals(r.header("Expect"), "100-continue"))
            r.expect_continue = true;
        // llhttp parses the head only: the body is framed by read_body() (1 = "no body" to llhttp; an
        // upgrade request then pauses with HPE_PAUSED_UPGRADE instead of HPE_PAUSED).
        return 1;
    }

    static int on_message_complete(llhttp_t *)
    {
        return HPE_PAUSED; // the head is done: read_body() takes over; llhttp resumes at done()
    }
};

void HttpParser::Buffer::reallocate(std::size_t n, std::size_t keep)
{
    std::unique_ptr<char[]> fresh(new char[n]);
    std::memcpy(fresh.get(), data_.get(), std::min(keep, n));
    data_ = std::move(fresh);
    size_ = n;
}

HttpParser::HttpParser(const Limits &limits)
    : ll_(std::make_unique<LL>()), limits_(limits), buf_(initial_buffer)
{
    llhttp_settings_init(&ll_->settings);
    ll_->settings.on_message_begin = &Callbacks::on_message_begin;
    ll_->settings.on_url = &Callbacks::on_url;
    ll_->settings.on_header_field = &Callbacks::on_header_field;
    ll_->settings.on_header_value = &Callbacks::on_header_value;
    ll_->settings.on_headers_complete = &Callbacks::on_headers_complete;
    ll_->settings.on_message_complete = &Callbacks::on_message_complete;
    llhttp_init(&ll_->parser, HTTP_REQUEST, &ll_->settings);
    ll_->parser.data = this;
}

HttpParser::~HttpParser() = default;

void HttpParser::reset_message()
{
    url_ = {};
    spans_.clear();
    head_bytes_ = 0;
    last_was_value_ = false;
    headers_done_ = false;
    last_closes_ = false;
    complete_ = false;
    head_reported_ = false;
    body_begun_ = false;
    body_sink_ = nullptr;
    req_.body.clear();
    req_.expect_continue = false;
    req_.upgrade = false;
    req_.chunked = false;
    body_kind_ = BodyKind::none;
    body_left_ = body_length_ = 0;
}

int HttpParser::fail(int status, std::string message)
{
    if (err_status_ == 0) {
        err_status_ = status;
        err_msg_ = std::move(message);
    }
    return HPE_USER;
}

void HttpParser::release_memory()
{
    std::size_t kept = req_.method.capacity() + req_.target.capacity() + req_.authority.capacity() +
                       req_.body.capacity() + req_.headers.capacity() * sizeof(req_.headers[0]);
    for (const auto &h : req_.headers)
        kept += h.first.capacity() + h.second.capacity();
    if (kept > 4096) {
        Request fresh;
        std::swap(req_, fresh);
    }
    if (spans_.capacity() > 64)
        std::vector<HeaderSpan>().swap(spans_);
    if (!in_message_ && parsed_ == end_ && buf_.size() > initial_buffer) {
        parsed_ = end_ = msg_start_ = 0;
        ll_->scanner.start(0);
        resize(initial_buffer, 0);
    }
}

bool HttpParser::idle() const
{
    return !in_message_ && parsed_ == end_;
}

bool HttpParser::has_buffered() const
{
    return parsed_ < end_;
}

void HttpParser::compact(std::size_t keep_from)
{
    if (keep_from == 0)
        return;
    std::size_t n = end_ - keep_from;
    if (n > 0)
        std::memmove(buf_.data(), buf_.data() + keep_from, n);
    auto shift = static_cast<std::uint32_t>(keep_from);
    if (in_message_ && !headers_done_) {
        url_.off -= shift;
        for (auto &h : spans_) {
            h.name.off -= shift;
            h.value.off -= shift;
        }
    }
    parsed_ -= keep_from;
    end_ -= keep_from;
    msg_start_ = msg_start_ >= keep_from ? msg_start_ - keep_from : 0;
    ll_->scanner.shift(keep_from);
}

bool HttpParser::resize(std::size_t n, std::size_t keep)
{
    const std::size_t extra = n > initial_buffer ? n - initial_buffer : 0;
    if (budget_ && extra > held_.bytes() && !held_.grow(*budget_, extra - held_.bytes()))
        return false;
    buf_.reallocate(n, keep);
    held_.shrink_to(extra);
    return true;
}

bool HttpParser::make_room(std::size_t min_free)
{
    if (buf_.size() - end_ >= min_free)
        return true;
    // Bytes of a header still being parsed must stay: the spans point at them.
    std::size_t keep_from = (in_message_ && !headers_done_) ? msg_start_ : parsed_;
    compact(keep_from);
    return buf_.size() - end_ >= min_free || resize(std::max(buf_.size() * 2, end_ + min_free), end_);
}

std::span<char> HttpParser::prepare(std::size_t min_free)
{
    if (err_status_ == 0 && !make_room(min_free))
        refuse_buffer();
    // After a failure the buffer is only a scratch for the lingering read before the close.
    if (err_status_ != 0)
        return {buf_.data(), buf_.size()};
    return {buf_.data() + end_, buf_.size() - end_};
}

void HttpParser::commit(std::size_t n)
{
    if (err_status_ == 0) // after a failure prepare() gave a scratch: nothing is kept
        end_ += n;
}

void HttpParser::refuse_buffer()
{
    buffer_refused_ = true;
    fail(503,
         "no memory left for request heads (http.limits.max_head_memory: " + std::to_string(budget_->used()) +
             " of " + std::to_string(budget_->limit()) + " bytes in use)");
}

bool HttpParser::keep_body(std::string_view bytes)
{
    if (!body_sink_) {
        req_.body.append(bytes.data(), bytes.size());
        return true;
    }
    if (auto r = body_sink_->write(bytes); !r) {
        fail(r.error().status, std::move(r.error().message));
        return false;
    }
    return true;
}

bool HttpParser::read_body()
{
    if (!body_begun_) {
        body_begun_ = true;
        if (body_sink_)
            body_sink_->begin(body_length_);
        else if (body_length_ > 0)
            req_.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(body_length_, 1 << 20)));
    }
    while (parsed_ < end_ && !complete_) {
        std::string_view in(buf_.data() + parsed_, end_ - parsed_);
        if (body_kind_ == BodyKind::length) {
            std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(body_left_, in.size()));
            if (!keep_body(in.substr(0, n)))
                return false;
            parsed_ += n;
            body_left_ -= n;
            complete_ = body_left_ == 0;
            continue;
        }
        auto st = chunked_->step(in);
        if (!st.data.empty() && !keep_body(st.data))
            return false;
        parsed_ += st.used;
        if (chunked_->failed()) {
            fail(chunked_->error_status(), chunked_->error_message());
            return false;
        }
        complete_ = chunked_->done();
    }
    return true;
}

HttpParser::Event HttpParser::parse_head()
{
    auto &scanner = ll_->scanner;
    HttpResult<void> scanned;
    if (!scanner.done())
        scanned = scanner.scan(buf_.data(), end_, limits_);
    // llhttp sees only whole lines that the scanner has checked, and never the body. When the scanner
    // fails, llhttp still gets the lines before the one that failed, and its own failure on them (431 for
    // too many headers...) comes first: fed in smaller reads, it would have had them before the bad byte
    // came, and the answer must not depend on how the reads split.
    if (feed_head(scanner.checked_end()) == Event::error)
        return Event::error;
    if (!scanned) {
        fail(scanned.error().status, std::move(scanned.error().message));
        return Event::error;
    }
    return Event::need_more;
}

HttpParser::Event HttpParser::feed_head(std::size_t feed_end)
{
    if (feed_end > parsed_) {
        feed_start_ = parsed_;
        llhttp_errno_t e = llhttp_execute(&ll_->parser, buf_.data() + parsed_, feed_end - parsed_);
        if (err_status_ != 0)
            return Event::error;
        if (e == HPE_OK) {
            parsed_ = feed_end;
        } else if ((e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) && headers_done_) {
            parsed_ = static_cast<std::size_t>(llhttp_get_error_pos(&ll_->parser) - buf_.data());
            paused_ = true;
            complete_ = body_kind_ == BodyKind::none;
        } else {
            const char *reason = llhttp_get_error_reason(&ll_->parser);
            fail(400, std::string("malformed request: ") + (reason ? reason : llhttp_errno_name(e)));
            return Event::error;
        }
    }
    return Event::need_more;
}

HttpParser::Event HttpParser::next()
{
    if (err_status_ != 0)
        return Event::error;
    if (closed_) {
        // After a request that closes the connection nothing is parsed (RFC 9112 §9.6): llhttp would
        // swallow what follows, and the head scanner must not judge it either, or the outcome would
        // depend on how the reads split.
        parsed_ = end_ = msg_start_ = 0;
        return Event::need_more;
    }
    if (!headers_done_ && parsed_ < end_ && parse_head() == Event::error)
        return Event::error;
    if (headers_done_ && !head_reported_) {
        head_reported_ = true;
        return Event::head;
    }
    if (complete_)
        return Event::request;
    if (headers_done_ && !read_body())
        return Event::error;
    if (complete_)
        return Event::request;
    // Drop what has been parsed when nothing refers to it, so a big body does not pile up.
    if ((!in_message_ || headers_done_) && parsed_ == end_) {
        parsed_ = end_ = msg_start_ = 0;
        if (!in_message_)
            ll_->scanner.start(0);
        if (buf_.size() > initial_buffer)
            resize(initial_buffer, 0);
    }
    // The read that follows needs room: a head or pipelined requests past the first buffer take it from the
    // server-wide budget, and a client that cannot have it gets 503 (never a larger process).
    if (!make_room(4096)) {
        refuse_buffer();
        return Event::error;
    }
    return Event::need_more;
}

std::string_view HttpParser::take_buffered()
{
    std::string_view rest(buf_.data() + parsed_, end_ - parsed_);
    parsed_ = end_;
    return rest;
}

void HttpParser::done()
{
    if (paused_) {
        if (llhttp_get_errno(&ll_->parser) == HPE_PAUSED_UPGRADE)
            llhttp_resume_after_upgrade(&ll_->parser);
        else
            llhttp_resume(&ll_->parser);
        paused_ = false;
    }
    in_message_ = false;
    closed_ = last_closes_;
    reset_message();
    if (req_.body.capacity() > 4096)
        std::string().swap(req_.body);
    std::size_t rest = end_ - parsed_;
    if (rest == 0) {
        parsed_ = end_ = msg_start_ = 0;
        if (buf_.size() > initial_buffer)
            resize(initial_buffer, 0);
    } else if (parsed_ > buf_.size() / 2) {
        compact(parsed_);
    }
    ll_->scanner.start(parsed_);
}

} // namespace ferry::server
