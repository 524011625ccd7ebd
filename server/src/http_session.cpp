// One HTTP/1.1 connection: parse, relay to the pool, answer in request order.
#include "ferry/relay/log.hpp"
#include "request_body.hpp"
#include "response.hpp"
#include "shared_state.hpp"

#include <boost/asio/write.hpp>

#include <array>
#include <charconv>
#include <optional>
#include <sys/socket.h>

namespace ferry::server::detail {
namespace {

constexpr std::size_t inline_body_max = 32 * 1024; // larger bodies are written straight from their buffer
constexpr std::size_t flush_threshold = 64 * 1024;

// The write timeout counts from the last progress: a slow but moving download is never cut.
awaitable<bool> write_buffers(SharedState &st, Conn &conn, tcp::socket &sock,
                              std::span<const asio::const_buffer> bufs, conf::Duration timeout)
{
    error_code ec = co_await write_all_fast(sock, bufs, [&st, &conn, timeout] { st.arm(conn, timeout); });
    st.disarm(conn);
    co_return !ec;
}

awaitable<bool> flush(SharedState &st, Conn &conn, tcp::socket &sock, std::string &out,
                      conf::Duration timeout)
{
    if (out.empty())
        co_return true;
    std::array<asio::const_buffer, 1> b{asio::buffer(out)};
    bool ok = co_await write_buffers(st, conn, sock, b, timeout);
    out.clear();
    if (out.capacity() > 1024 * 1024)
        std::string().swap(out);
    co_return ok;
}

void build_context(relay::RequestContext &ctx, const Request &req, const std::string &remote,
                   std::string_view default_host)
{
    ctx.remote_addr = remote;
    ctx.protocol = req.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
    ctx.method = req.method;
    // The parser validated the target form and the Host value (RFC 9110 uri-host [":" port]): nothing
    // from either can change the path PHP routes on.
    std::string_view target = req.target;
    if (req.form == TargetForm::absolute) {
        ctx.uri.assign(target);
    } else {
        std::string_view host = req.header("Host");
        if (host.empty())
            host = default_host;
        ctx.uri.assign("http://");
        ctx.uri.append(host);
        if (req.form == TargetForm::origin)
            ctx.uri.append(target);
    }
    ctx.raw_query.clear();
    if (auto q = target.find('?'); q != std::string_view::npos)
        ctx.raw_query.assign(target.substr(q + 1));
    // The context is reused from one request to the next: fields are assigned in place so their strings
    // and lists keep their capacity (no allocation per header on a keep-alive connection).
    ctx.cookies.clear();
    std::size_t used = 0;
    for (const auto &[name, value] : req.headers) {
        if (relay::iequals(name, "Host"))
            continue;
        if (relay::iequals(name, "Cookie"))
            relay::parse_cookies(value, ctx.cookies);
        auto end = ctx.headers.begin() + static_cast<std::ptrdiff_t>(used);
        auto it = std::find_if(ctx.headers.begin(), end,
                               [&](const relay::HeaderField &f) { return relay::iequals(f.name, name); });
        if (it != end) {
            it->values.push_back(value);
            continue;
        }
        if (used == ctx.headers.size())
            ctx.headers.emplace_back();
        auto &field = ctx.headers[used++];
        relay::canonical_header_name(name, field.name);
        field.values.resize(1);
        field.values[0].assign(value);
    }
    ctx.headers.resize(used);
    ctx.parsed = false;
}

// A HEAD answer without a body may say in Content-Length how long the GET body would be: keep that number.
std::size_t head_content_length(const relay::ResponseContext &rc, std::size_t fallback)
{
    for (const auto &f : rc.headers) {
        if (!relay::iequals(f.name, "Content-Length") || f.values.size() != 1)
            continue;
        const std::string &v = f.values[0];
        std::size_t n = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc() && p == v.data() + v.size() && !v.empty())
            return n;
    }
    return fallback;
}

int final_status(int status, int pid)
{
    if (status >= 200 && status <= 599)
        return status;
    log::error("http", "worker " + std::to_string(pid) + " answered with invalid status " +
                           std::to_string(status) + ", sending 500");
    return 500;
}

// Writes a streamed response (frames with the STREAM bit) to the client as they arrive.
class SessionSink final : public pool::StreamSink {
public:
    SessionSink(SharedState &st, Conn &conn, tcp::socket &sock, std::string &out, const Request &req,
                conf::Duration timeout, const bool &draining)
        : st_(st), conn_(conn), sock_(sock), out_(out), head_request_(req.method == "HEAD"),
          http10_(req.version_minor == 0), keep_alive_(req.keep_alive && !req.upgrade), timeout_(timeout),
          draining_(draining)
    {
    }

    bool started() const { return started_; }
    bool failed() const { return failed_; }
    bool keep_alive() const { return keep_alive_; }

    awaitable<bool> on_informational(const relay::ResponseContext &head) override
    {
        if (http10_ || started_)
            co_return true; // no 1xx for HTTP/1.0 clients
        Head h;
        h.status = head.status;
        h.worker = &head;
        h.framing = Framing::none;
        append_head(out_, h);
        if (!co_await flush(st_, conn_, sock_, out_, timeout_))
            failed_ = true;
        co_return !failed_;
    }

    awaitable<bool> on_chunk(const relay::ResponseContext &head, std::string_view body, bool last) override
    {
        if (!started_) {
            started_ = true;
            status_ = final_status(head.status, 0);
            Head h;
            h.status = status_;
            h.worker = &head;
            h.http10 = http10_;
            if (no_body_status(status_)) {
                h.framing = Framing::none;
            } else if (http10_) {
                h.framing = Framing::close;
                keep_alive_ = false;
            } else {
                h.framing = Framing::chunked;
            }
            chunked_ = h.framing == Framing::chunked;
            if (draining_)
                keep_alive_ = false;
            h.keep_alive = keep_alive_;
            append_head(out_, h);
        }
        bool send_body = !head_request_ && !no_body_status(status_);
        std::array<asio::const_buffer, 3> bufs;
        std::size_t nb = 0;
        if (send_body && !body.empty()) {
            if (chunked_) {
                char hex[20];
                auto r = std::to_chars(hex, hex + sizeof hex, body.size(), 16);
                out_.append(hex, r.ptr);
                out_ += "\r\n";
            }
            bufs[nb++] = asio::buffer(out_);
            bufs[nb++] = asio::buffer(body.data(), body.size());
            trailer_ = chunked_ ? "\r\n" : "";
        } else {
            bufs[nb++] = asio::buffer(out_);
            trailer_.clear();
        }
        if (last && chunked_ && send_body)
            trailer_ += "0\r\n\r\n";
        if (!trailer_.empty())
            bufs[nb++] = asio::buffer(trailer_);
        bool ok = co_await write_buffers(st_, conn_, sock_, std::span(bufs.data(), nb), timeout_);
        out_.clear();
        if (!ok)
            failed_ = true;
        co_return ok;
    }

    // A response whose body is complete (one frame): head with Content-Length, then the body. With
    // `may_batch` (more pipelined requests are buffered) a small response stays in `out` to go out with the
    // next ones; otherwise head and body leave now in one writev, the body without a copy.
    // Puts the head of a response whose body is complete (one frame) in `out`: Content-Length framing. With
    // `may_batch` (more pipelined requests are buffered) a small body joins it there and nothing is left to
    // write now (nullopt); otherwise returns the body to write after `out` in one writev, without a copy
    // (empty for HEAD, 1xx, 204 and 304).
    std::optional<std::string_view> prepare_whole(const relay::ResponseContext &rc, std::string_view body,
                                                  int worker_pid, bool may_batch)
    {
        Head h;
        h.status = final_status(rc.status, worker_pid);
        h.worker = &rc;
        if (draining_)
            keep_alive_ = false;
        h.keep_alive = keep_alive_;
        h.http10 = http10_;
        bool no_body = no_body_status(h.status);
        h.framing = no_body ? Framing::none : Framing::length;
        h.content_length = body.size();
        if (head_request_ && body.empty())
            h.content_length = head_content_length(rc, 0);
        int dropped = 0;
        append_head(out_, h, &dropped);
        if (dropped > 0)
            log::warn("http", "worker " + std::to_string(worker_pid) + ": dropped " +
                                  std::to_string(dropped) +
                                  " response header(s) with an invalid name or a CR/LF/NUL in the value");
        if (head_request_ || no_body || body.empty())
            body = {};
        if (may_batch && body.size() <= inline_body_max) {
            out_.append(body.data(), body.size());
            return std::nullopt;
        }
        return body;
    }

    awaitable<bool> write_whole(const relay::ResponseContext &head, std::string_view body) override
    {
        std::string_view rest = *prepare_whole(head, body, 0, false);
        std::array<asio::const_buffer, 2> bufs{asio::buffer(out_), asio::buffer(rest.data(), rest.size())};
        bool ok = co_await write_buffers(st_, conn_, sock_, bufs, timeout_);
        out_.clear();
        failed_ = failed_ || !ok;
        co_return ok;
    }

    bool client_gone() override
    {
        // A reset leaves ECONNRESET (or another error) pending on the socket; a FIN (half-close) does not.
        int err = 0;
        socklen_t len = sizeof err;
        return ::getsockopt(sock_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0;
    }

private:
    SharedState &st_;
    Conn &conn_;
    tcp::socket &sock_;
    std::string &out_;
    bool head_request_, http10_, keep_alive_;
    conf::Duration timeout_;
    const bool &draining_;
    bool started_ = false, failed_ = false, chunked_ = false;
    int status_ = 200;
    std::string trailer_;
};

std::size_t retained(const relay::RequestContext &c)
{
    std::size_t n = c.remote_addr.capacity() + c.protocol.capacity() + c.method.capacity() +
                    c.uri.capacity() + c.raw_query.capacity() +
                    c.headers.capacity() * sizeof(relay::HeaderField);
    for (const auto &h : c.headers) {
        n += h.name.capacity();
        for (const auto &v : h.values)
            n += v.capacity();
    }
    for (const auto &[k, v] : c.cookies)
        n += k.capacity() + v.capacity();
    return n;
}

// A connection waiting for its next request keeps only small buffers (issue 5 item 5): whatever a large
// request or response made it hold goes back. Small ones stay, so ordinary keep-alive traffic reuses them.
void release_idle_memory(std::string &out, std::string &body_out, relay::RequestContext &ctx,
                         HttpParser &parser)
{
    constexpr std::size_t keep = 4096;
    // Cheap when nothing was large (the common case): the strings of a small head are small.
    if (out.capacity() <= keep && body_out.capacity() <= keep && parser.last_head_size() <= keep &&
        parser.buffer_capacity() <= 8192)
        return;
    if (out.capacity() > keep)
        std::string().swap(out);
    if (body_out.capacity() > keep)
        std::string().swap(body_out);
    if (retained(ctx) > keep)
        ctx = relay::RequestContext{};
    parser.release_memory();
}

struct Registration {
    SharedState &st;
    std::list<Conn *>::iterator it;
    Registration(SharedState &s, Conn *c) : st(s) { it = st.conns.insert(st.conns.end(), c); }
    ~Registration()
    {
        st.wheel.remove(**it);
        st.conns.erase(it);
    }
};

} // namespace

awaitable<void> http_session(SharedState &st, tcp::socket sock)
{
    Conn conn;
    conn.socket = &sock;
    Registration reg(st, &conn);
    const auto &http = st.config.http;

    error_code ec;
    sock.set_option(tcp::no_delay(true), ec);
    sock.non_blocking(true, ec); // write_all_fast() writes to it directly
    std::string remote;
    if (auto ep = sock.remote_endpoint(ec); !ec)
        remote = ep.address().to_string();

    RequestBody body(st.budget, st.config.http.body_buffer_size, st.temp_dir);
    HttpParser parser(st.limits, &body);
    std::string out;
    std::string body_out;
    relay::RequestContext ctx;
    unsigned batched = 0;
    bool linger = false; // the client may still be sending: drain before closing so it reads our answer
    std::optional<steady::time_point> header_deadline;

    for (;;) {
        auto ev = parser.next();
        if (ev == HttpParser::Event::need_more) {
            if (!co_await flush(st, conn, sock, out, http.write_timeout))
                break;
            batched = 0;
            if (st.draining && parser.idle())
                break;
            conn.idle = parser.idle();
            // read_header covers the whole header from its first byte (no slowloris trickle);
            // idle and read_body restart at every read.
            if (conn.idle) {
                header_deadline.reset();
                st.arm(conn, http.idle_timeout);
                release_idle_memory(out, body_out, ctx, parser);
            } else if (parser.in_body()) {
                header_deadline.reset();
                st.arm(conn, http.read_body_timeout);
            } else {
                if (!header_deadline)
                    header_deadline = steady::now() + http.read_header_timeout;
                st.arm_at(conn, *header_deadline);
            }
            auto buf = parser.prepare();
            auto [rec, n] = co_await sock.async_read_some(asio::buffer(buf.data(), buf.size()), nothrow);
            st.disarm(conn);
            if (rec) {
                if (conn.timed_out && !parser.idle()) {
                    log::info("http", remote + ": timed out reading the request, sending 408");
                    conn.timed_out = false;
                    detail::append_error(out, 408, "timed out reading the request", false, false);
                    co_await flush(st, conn, sock, out, http.write_timeout);
                }
                break;
            }
            parser.commit(n);
            conn.idle = false;
            continue;
        }
        if (ev == HttpParser::Event::headers) {
            out += "HTTP/1.1 100 Continue\r\n\r\n";
            if (!co_await flush(st, conn, sock, out, http.write_timeout))
                break;
            continue;
        }
        if (ev == HttpParser::Event::error) {
            if (auto lvl = parser.error_status() >= 500 ? log::Level::error : log::Level::info;
                log::enabled(lvl))
                log::write(lvl, "http",
                           remote + ": " + std::to_string(parser.error_status()) + " " +
                               parser.error_message());
            // A 4xx names what was wrong with the client's own request; a 5xx (a temp file that cannot be
            // written) says nothing of the server's paths: that is for the log line above.
            detail::append_error(out, parser.error_status(),
                                 parser.error_status() >= 500 ? std::string() : parser.error_message(), false,
                                 false);
            co_await flush(st, conn, sock, out, http.write_timeout);
            linger = true;
            break;
        }

        // A whole request.
        const Request &req = parser.request();
        ++st.requests;
        build_context(ctx, req, remote, st.default_host);
        const bool head_request = req.method == "HEAD";
        bool keep_alive = req.keep_alive && !st.draining && !req.upgrade;

        SessionSink sink(st, conn, sock, out, req, http.write_timeout, st.draining);
        body_out.clear();
        pool::Reply res = co_await st.pool.exec(ctx, body.ref(), body_out, &sink);
        body.clear();
        header_deadline.reset();
        if (st.draining)
            keep_alive = false; // SIGTERM came while PHP worked: say Connection: close

        switch (res.outcome) {
        case pool::Outcome::ok:
            if (!res.streamed && !res.written) {
                std::string_view answer = res.body_frame.data ? res.taken_body() : std::string_view(body_out);
                if (auto rest =
                        sink.prepare_whole(res.response, answer, res.worker_pid, parser.has_buffered())) {
                    std::array<asio::const_buffer, 2> bufs{asio::buffer(out),
                                                           asio::buffer(rest->data(), rest->size())};
                    if (!co_await write_buffers(st, conn, sock, bufs, http.write_timeout))
                        keep_alive = false;
                    out.clear();
                }
            }
            keep_alive = keep_alive && sink.keep_alive() && !sink.failed();
            break;
        case pool::Outcome::worker_error:
            detail::append_error(out, http.internal_error_code, "", keep_alive, head_request);
            break;
        case pool::Outcome::worker_crashed:
            if (sink.started()) {
                keep_alive = false; // the response is cut short: closing tells the client
            } else {
                detail::append_error(out, 502, "the worker handling this request died", keep_alive,
                                     head_request);
            }
            break;
        case pool::Outcome::timed_out:
            log::warn("http", remote + " " + req.method + " " + req.target + ": 504: " + res.message);
            if (sink.started())
                keep_alive = false;
            else
                detail::append_error(out, 504, "the application did not answer in time", keep_alive,
                                     head_request);
            break;
        case pool::Outcome::no_worker:
            // The cause (boot errors, PHP's stderr, pids) is for the log, not for the client.
            log::warn("http", remote + " " + req.method + " " + req.target + ": 503: " + res.message);
            detail::append_error(out, 503, "no PHP worker is available, try again later", keep_alive,
                                 head_request);
            break;
        case pool::Outcome::client_gone:
            log::debug("http",
                       remote + " " + req.method + " " + req.target + ": not executed: " + res.message);
            keep_alive = false;
            out.clear();
            break;
        case pool::Outcome::cancelled:
            keep_alive = false;
            break;
        }
        parser.done();
        if (!keep_alive) {
            co_await flush(st, conn, sock, out, http.write_timeout);
            linger = parser.has_buffered();
            break;
        }
        ++batched;
        if (!parser.has_buffered() || out.size() >= flush_threshold || batched >= http.max_pipelined) {
            if (!co_await flush(st, conn, sock, out, http.write_timeout))
                break;
            batched = 0;
        }
    }
    sock.shutdown(tcp::socket::shutdown_send, ec);
    if (linger && !ec) {
        // Lingering close (as nginx): closing with unread input would reset the connection and could
        // destroy the response before the client reads it.
        st.arm(conn, std::chrono::seconds(2));
        std::size_t drained = 0;
        // The parser's free space serves as scratch (an array here would sit in every session's frame).
        auto scratch = parser.prepare();
        while (drained < 4 * 1024 * 1024) {
            auto [rec, n] =
                co_await sock.async_read_some(asio::buffer(scratch.data(), scratch.size()), nothrow);
            if (rec)
                break;
            drained += n;
        }
    }
    sock.close(ec);
}

} // namespace ferry::server::detail
