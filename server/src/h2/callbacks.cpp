// nghttp2's side of an HTTP/2 connection: its callbacks (a request's head, fields, body and end; a stream's
// close), the session with its limits, and what is submitted to it (heads, trailers).
#include "control/limit_metrics.hpp"
#include "ferry/base/log.hpp"
#include "h2/connection.hpp"
#include "h2/stream.hpp"
#include "shared_state.hpp"

#include <nghttp2/nghttp2.h>

#include <charconv>

namespace ferry::server::detail::h2 {

namespace {

std::string_view sv(const std::uint8_t *p, std::size_t n)
{
    return {reinterpret_cast<const char *>(p), n};
}

} // namespace

struct Connection::Callbacks {
    static Connection &self(void *user) { return *static_cast<Connection *>(user); }
    static H2Stream *stream(nghttp2_session *ng, std::int32_t id)
    {
        return static_cast<H2Stream *>(nghttp2_session_get_stream_user_data(ng, id));
    }

    static int begin_headers(nghttp2_session *, const nghttp2_frame *frame, void *user)
    {
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            self(user).begin_stream(frame->hd.stream_id);
        return 0;
    }

    static int header(nghttp2_session *ng, const nghttp2_frame *frame, const std::uint8_t *name,
                      std::size_t namelen, const std::uint8_t *value, std::size_t valuelen, std::uint8_t,
                      void *user)
    {
        H2Stream *s = stream(ng, frame->hd.stream_id);
        if (!s || s->refused || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
            return 0; // trailers are not passed on (PSR-7 has no place for them)
        Connection &c = self(user);
        Request &req = s->request;
        // The decoded list is capped as HTTP/1.1's head is (an HPACK bomb decodes to no more than this).
        s->header_bytes += namelen + valuelen + 32;
        if (s->header_bytes > c.site_.limits->max_header_size ||
            req.headers.size() >= c.site_.limits->max_headers) {
            s->refused = 431;
            return 0;
        }
        // Every connection's streams together hold their heads from http.limits.max_head_memory, as
        // HTTP/1.1's large heads do: 128 streams of 64 KiB heads waiting for their bodies would otherwise be
        // 8 MiB a connection that no budget sees.
        if (Budget *b = c.st_.head_budget) {
            if (!b->try_take(namelen + valuelen + 32)) {
                s->refused = 503;
                c.st_.counters.limits.count(LimitEvent::head_memory);
                return 0;
            }
            s->budgeted += namelen + valuelen + 32;
        }
        std::string_view n = sv(name, namelen), v = sv(value, valuelen);
        if (n.starts_with(':')) {
            if (n == ":method")
                req.method = v;
            else if (n == ":path")
                req.target = v;
            else if (n == ":authority")
                req.authority = v;
            return 0; // :scheme, and :protocol (not offered)
        }
        if (n == "cookie") { // split into several fields by HTTP/2 (RFC 9113 §8.2.3): one again for PHP
            for (auto &[hn, hv] : req.headers)
                if (hn == "cookie") {
                    hv.append("; ").append(v);
                    return 0;
                }
        }
        req.headers.emplace_back(n, v);
        return 0;
    }

    static int frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
    {
        Connection &c = self(user);
        if (frame->hd.type == NGHTTP2_RST_STREAM)
            c.count_reset();
        H2Stream *s = stream(ng, frame->hd.stream_id);
        if (!s)
            return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            c.head_done(*s);
        if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
            (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !s->refused && s->open && !s->ready) {
            s->ready = true;
            c.ready_.push_back(s);
        }
        return 0;
    }

    static int data_chunk(nghttp2_session *ng, std::uint8_t, std::int32_t id, const std::uint8_t *data,
                          std::size_t len, void *user)
    {
        Connection &c = self(user);
        H2Stream *s = stream(ng, id);
        if (!s)
            return 0;
        if (s->refused) {
            // Answered already: once the answer is all out, the upload is stopped (nginx does the same).
            if (s->all_taken() && !s->reset_sent) {
                s->reset_sent = true;
                nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
            }
            return 0;
        }
        s->body_bytes += len;
        if (s->body_bytes > c.site_.limits->max_body_size) {
            c.refuse(*s, 413, "the request body is larger than http.max_request_size");
            return 0;
        }
        if (s->sink) {
            if (auto r = s->sink->write(sv(data, len)); !r)
                c.refuse(*s, r.error().status, r.error().message);
        } else {
            s->request.body.append(sv(data, len));
        }
        return 0;
    }

    static int stream_close(nghttp2_session *ng, std::int32_t id, std::uint32_t code, void *user)
    {
        H2Stream *s = stream(ng, id);
        if (!s)
            return 0;
        nghttp2_session_set_stream_user_data(ng, id, nullptr);
        s->finished = true;
        s->closed(code);
        if (s->users == 0 && !s->ready)
            self(user).forget(*s);
        return 0;
    }

    static ssize_t read_data(nghttp2_session *, std::int32_t, std::uint8_t *, std::size_t len,
                             std::uint32_t *flags, nghttp2_data_source *source, void *)
    {
        return static_cast<H2Stream *>(source->ptr)->read_data(len, flags);
    }

    static int send_data(nghttp2_session *, nghttp2_frame *, const std::uint8_t *framehd, std::size_t length,
                         nghttp2_data_source *source, void *user)
    {
        return static_cast<H2Stream *>(source->ptr)->send_frame(self(user).wbuf_, framehd, length);
    }

    static int error(nghttp2_session *, int code, const char *msg, std::size_t len, void *user)
    {
        // The client broke the protocol (nghttp2 answers it: RST_STREAM or GOAWAY): said at info, as nginx
        // logs a client's errors.
        log::info("http2", self(user).tr_.remote() + ": " + std::string(msg, len) + " (" +
                               nghttp2_strerror(code) + ")");
        return 0;
    }
};

nghttp2_session *Connection::new_session()
{
    using C = Callbacks;
    nghttp2_session_callbacks *cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, C::begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, C::header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, C::frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, C::data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, C::stream_close);
    nghttp2_session_callbacks_set_error_callback2(cb, C::error);
    nghttp2_session_callbacks_set_send_data_callback(cb, C::send_data);
    nghttp2_option *opt = nullptr;
    nghttp2_option_new(&opt);
    // Rapid reset (CVE-2023-44487): count_reset() ends the connection with ENHANCE_YOUR_CALM past a burst of
    // 1000 resets then 33 a second (nghttp2's own figures, whose limit, answering INTERNAL_ERROR, is set
    // above ours as a backstop). Reset streams cost no PHP request unless already running, and those count
    // against max_concurrent_streams until their handler returns (begin_stream).
    nghttp2_option_set_stream_reset_rate_limit(opt, 2 * reset_burst, 2 * reset_rate);
    // Unanswered SETTINGS / PING: at most 1000 acknowledgements queued (a client that does not read).
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_session *ng = nullptr;
    nghttp2_session_server_new2(&ng, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    return ng;
}

bool Connection::submit_head(H2Stream &s, Framer::Head &head)
{
    std::vector<nghttp2_nv> nv;
    nv.reserve(head.fields.size() + 1);
    char status[4];
    std::to_chars(status, status + 3, head.status);
    const auto add = [&nv](const char *n, std::size_t nl, const char *v, std::size_t vl) {
        nv.push_back({reinterpret_cast<std::uint8_t *>(const_cast<char *>(n)),
                      reinterpret_cast<std::uint8_t *>(const_cast<char *>(v)), nl, vl, NGHTTP2_NV_FLAG_NONE});
    };
    add(":status", 7, status, 3);
    for (const auto &[n, v] : head.fields)
        add(n.data(), n.size(), v.data(), v.size());
    int rv;
    if (head.status < 200) {
        rv = nghttp2_submit_headers(ng_, NGHTTP2_FLAG_NONE, s.id(), nullptr, nv.data(), nv.size(), nullptr);
    } else if (head.body) {
        nghttp2_data_provider dp;
        dp.source.ptr = &s;
        dp.read_callback = Callbacks::read_data;
        rv = nghttp2_submit_response(ng_, s.id(), nv.data(), nv.size(), &dp);
    } else {
        rv = nghttp2_submit_response(ng_, s.id(), nv.data(), nv.size(), nullptr);
    }
    wake();
    return rv == 0;
}

void Connection::submit_trailers(H2Stream &s, const std::vector<std::pair<std::string, std::string>> &fields)
{
    std::vector<nghttp2_nv> nv;
    nv.reserve(fields.size());
    for (const auto &[n, v] : fields)
        nv.push_back({reinterpret_cast<std::uint8_t *>(const_cast<char *>(n.data())),
                      reinterpret_cast<std::uint8_t *>(const_cast<char *>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE});
    nghttp2_submit_trailer(ng_, s.id(), nv.data(), nv.size()); // nghttp2 copies the fields
}

} // namespace ferry::server::detail::h2
