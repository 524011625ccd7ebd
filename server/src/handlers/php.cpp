#include "php.hpp"

#include "control/limit_metrics.hpp"
#include "failure.hpp"
#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "forms/form_body.hpp"
#include "forms/multipart_body.hpp"
#include "forms/urlencoded.hpp"
#include "http/body_stream.hpp"
#include "http/response.hpp"
#include "proxies.hpp"
#include "request_body.hpp"
#include "sendfile.hpp"
#include "shared_state.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

constexpr std::size_t inline_body_max = 32 * 1024; // larger bodies are written straight from their buffer

void build_context(relay::RequestContext &ctx, const Request &req, const std::string &remote,
                   std::string_view default_host, bool sendfile = false)
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
        if (iequals(name, "Host") || iequals(name, "X-Sendfile-Type")) // the latter is the server's to say
            continue;
        if (iequals(name, "Cookie"))
            parse_cookies(value, ctx.cookies);
        auto end = ctx.headers.begin() + static_cast<std::ptrdiff_t>(used);
        auto it = std::find_if(ctx.headers.begin(), end,
                               [&](const relay::HeaderField &f) { return iequals(f.name, name); });
        if (it != end) {
            it->values.push_back(value);
            continue;
        }
        if (used == ctx.headers.size())
            ctx.headers.emplace_back();
        auto &field = ctx.headers[used++];
        canonical_header_name(name, field.name);
        field.values.resize(1);
        field.values[0].assign(value);
    }
    if (sendfile) { // http.middleware "sendfile": PHP may answer with X-Sendfile (handlers/sendfile.hpp)
        if (used == ctx.headers.size())
            ctx.headers.emplace_back();
        auto &field = ctx.headers[used++]; // reused as the others are: no allocation per request
        field.name.assign("X-Sendfile-Type");
        field.values.resize(1);
        field.values[0].assign("X-Sendfile");
    }
    ctx.headers.resize(used);
    ctx.parsed = false;
}

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

// A HEAD answer without a body may say in Content-Length how long the GET body would be: keep that number.
std::size_t head_content_length(const relay::ResponseContext &rc, std::size_t fallback)
{
    for (const auto &f : rc.headers) {
        if (!iequals(f.name, "Content-Length") || f.values.size() != 1)
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

// Writes the worker's answer: streamed frames (the STREAM bit) as they arrive, or a whole one.
class ResponseSink final : public pool::StreamSink {
public:
    ResponseSink(const SharedState &st, Exchange &ex)
        : st_(st), ex_(ex), stream_(ex.transport, ex.out, ex.request),
          head_request_(ex.request.method == "HEAD"), keep_alive_(ex.keep_alive)
    {
    }

    bool started() const { return stream_.started(); }
    bool keep_alive() const { return (stream_.started() ? stream_.keep_alive() : keep_alive_) && !failed_; }

    awaitable<bool> on_informational(const relay::ResponseContext &head) override
    {
        co_return co_await stream_.informational(head.status, &head);
    }

    awaitable<bool> on_chunk(const relay::ResponseContext &head, std::string_view body, bool last) override
    {
        if (!stream_.started()) {
            Head h;
            h.status = final_status(head.status, 0);
            ex_.status = h.status;
            h.worker = &head;
            h.keep_alive = keep_alive_ && !st_.draining;
            stream_.start(h);
        }
        bool ok = co_await stream_.write(body, last);
        failed_ = failed_ || !ok;
        co_return ok;
    }

    // Puts the head of a response whose body is complete (one frame) in `out`: Content-Length framing. With
    // `may_batch` (more pipelined requests are buffered) a small body joins it there and nothing is left to
    // write now (nullopt); otherwise returns the body to write after `out` in one writev, without a copy
    // (empty for HEAD, 1xx, 204 and 304).
    std::optional<std::string_view> prepare_whole(const relay::ResponseContext &rc, std::string_view body,
                                                  int worker_pid, bool may_batch)
    {
        if (!append_whole_head(rc, body.size(), worker_pid))
            body = {};
        if (may_batch && body.size() <= inline_body_max) {
            ex_.out.append(body.data(), body.size());
            return std::nullopt;
        }
        return body;
    }

    // A large single-frame response the body budget cannot hold: it goes to an unnamed temp file (disk, not
    // the server's memory) and the worker is free at once; send_spilled() sends it from there. Writing it to
    // the client here would hold the worker for as long as a slow reader takes (every worker pinned that
    // way, a plain GET waited for one). Only if no temp file can be had is it written to the client now.
    awaitable<bool> write_whole(const relay::ResponseContext &head, std::string_view body) override
    {
        if (spill(body))
            co_return true;
        std::string_view rest = *prepare_whole(head, body, 0, false);
        std::array<asio::const_buffer, 2> bufs{asio::buffer(ex_.out), asio::buffer(rest.data(), rest.size())};
        bool ok = co_await ex_.transport.write(bufs);
        ex_.out.clear();
        failed_ = failed_ || !ok;
        co_return ok;
    }

    bool spilled() const { return spill_fd_ >= 0; }

    // Sends the head and the spilled body (after the worker was released): false when the connection must
    // close.
    awaitable<bool> send_spilled(const relay::ResponseContext &rc, int worker_pid)
    {
        if (!append_whole_head(rc, spill_size_, worker_pid))
            co_return true;
        if (!co_await ex_.transport.flush(ex_.out, true))
            co_return false;
        auto sent = co_await ex_.transport.send_file(spill_fd_, 0, spill_size_);
        co_return sent == Transport::Sent::all;
    }

    ~ResponseSink() override
    {
        if (spill_fd_ >= 0)
            ::close(spill_fd_);
    }
    ResponseSink(const ResponseSink &) = delete;
    ResponseSink &operator=(const ResponseSink &) = delete;

    bool client_gone() override { return ex_.transport.client_gone(); }
    bool client_left() override { return ex_.transport.client_left(); }

private:
    // The head of a whole response (Content-Length: `size`) into `out`; false when no body follows (HEAD,
    // 1xx, 204, 304, an empty body).
    bool append_whole_head(const relay::ResponseContext &rc, std::size_t size, int worker_pid)
    {
        Head h;
        h.status = final_status(rc.status, worker_pid);
        ex_.status = h.status;
        h.worker = &rc;
        if (st_.draining)
            keep_alive_ = false;
        h.keep_alive = keep_alive_;
        h.http10 = ex_.request.version_minor == 0;
        bool no_body = no_body_status(h.status);
        h.framing = no_body ? Framing::none : Framing::length;
        h.content_length = size;
        if (head_request_ && size == 0)
            h.content_length = head_content_length(rc, 0);
        int dropped = 0;
        append_head(ex_.out, h, &dropped);
        if (dropped > 0)
            log::warn("http", "worker " + std::to_string(worker_pid) + ": dropped " +
                                  std::to_string(dropped) +
                                  " response header(s) with an invalid name or a CR/LF/NUL in the value");
        return !(head_request_ || no_body || size == 0);
    }

    bool spill(std::string_view body)
    {
        int fd = open_temp_file(st_.temp_dir);
        if (fd < 0)
            return false;
        while (!body.empty()) {
            ssize_t n = ::write(fd, body.data(), body.size());
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                log::warn("http", "cannot write a response body to a temp file in " + st_.temp_dir + ": " +
                                      std::strerror(n < 0 ? errno : ENOSPC) +
                                      "; sending it while the worker waits");
                ::close(fd);
                return false;
            }
            spill_size_ += static_cast<std::size_t>(n);
            body.remove_prefix(static_cast<std::size_t>(n));
        }
        spill_fd_ = fd;
        return true;
    }

    const SharedState &st_;
    Exchange &ex_;
    BodyStream stream_;
    bool head_request_, keep_alive_;
    bool failed_ = false;
    int spill_fd_ = -1;
    std::size_t spill_size_ = 0;
};

relay::FormLimits form_limits(const conf::HttpConfig &http)
{
    relay::FormLimits l;
    l.max_fields = http.max_form_fields;
    l.max_depth = http.max_form_depth;
    l.fields_key = "http.limits.max_form_fields";
    l.depth_key = "http.limits.max_form_depth";
    return l;
}

// "<client> <method> <target>" for a log line.
std::string describe(const Exchange &ex)
{
    return ex.transport.remote() + " " + ex.request.method + " " + ex.request.target;
}

class PhpConnection final : public Handler::Connection {
public:
    PhpConnection(SharedState &st, pool::Pool &pool, const TrustedProxies &proxies)
        : st_(st), pool_(pool), body_(st.budget, st.config.http.body_buffer_size, st.temp_dir),
          form_body_(st.budget, st.config.http.max_form_size), form_(form_limits(st.config.http)),
          proxies_(proxies)
    {
    }

    // A urlencoded form is parsed by the server (docs/protocol.md §3) unless http.raw_body; RoadRunner
    // parses it for every method but HEAD and OPTIONS.
    BodySink *body_sink(const Request &req) override
    {
        const auto &http = st_.config.http;
        const bool parse = !http.raw_body && req.method != "HEAD" && req.method != "OPTIONS";
        std::string_view type = req.header("Content-Type");
        is_form_ = parse && is_urlencoded(type);
        is_multipart_ = parse && !is_form_ && MultipartParser::is_multipart(type);
        if (is_form_)
            return &form_body_;
        if (is_multipart_) {
            if (!multipart_) {
                UploadRules rules;
                rules.dir = st_.temp_dir;
                rules.prefix = st_.upload_prefix;
                rules.forbid = http.uploads_forbid;
                rules.allow = http.uploads_allow;
                rules.max_file_size = http.uploads_max_file_size;
                rules.max_fields_size = http.max_form_size;
                rules.limits = form_limits(http);
                rules.budget = &st_.budget;
                multipart_ = std::make_unique<MultipartBody>(std::move(rules));
            }
            multipart_->start(type);
            return multipart_.get();
        }
        return &body_;
    }

    void release_idle_memory(bool large_head) override
    {
        multipart_.reset(); // its temp files went after the response
        if (body_out_.capacity() > 4096)
            std::string().swap(body_out_);
        if (large_head && retained(ctx_) > 4096)
            ctx_ = relay::RequestContext{};
    }

    awaitable<After> handle(Exchange &ex) override
    {
        const auto &http = st_.config.http;
        const Request &req = ex.request;
        build_context(ctx_, req, ex.transport.remote(), st_.default_host, http.sendfile);
        if (!proxies_.empty())
            proxies_.apply(req, ctx_);
        pool::BodyRef body = body_.ref();
        if (is_form_) {
            auto parsed = parse_urlencoded(form_body_.text(), form_);
            form_body_.drop_text(); // its reservation stays for the tree until the answer
            if (!parsed) {
                log::info("http", describe(ex) + ": 400 " + parsed.error().message);
                form_.clear();
                form_body_.clear();
                ex.status = 400;
                append_error(ex.out, 400, parsed.error().message, ex.keep_alive, false);
                co_return ex.keep_alive ? After::keep_alive : After::close;
            }
            ctx_.parsed = true;
            body = pool::BodyRef{};
            body.form = &form_;
        } else if (is_multipart_) {
            if (auto done = multipart_->finish(); !done) {
                log::info("http", describe(ex) + ": 400 " + done.error().message);
                multipart_->clear();
                ex.status = 400;
                append_error(ex.out, 400, done.error().message, ex.keep_alive, false);
                co_return ex.keep_alive ? After::keep_alive : After::close;
            }
            ctx_.parsed = true;
            body = pool::BodyRef{};
            body.form = &multipart_->fields();
            if (!multipart_->files().empty())
                ctx_.uploads = &multipart_->files();
        }
        ResponseSink sink(st_, ex);
        body_out_.clear();
        pool::Reply res = co_await pool_.exec(ctx_, body, body_out_, &sink, st_.loop);
        ex.worker_pid = res.worker_pid;
        body_.clear();
        if (is_form_) {
            form_.clear();
            form_body_.clear();
        }
        if (is_multipart_)
            multipart_->clear(); // the temp files go, whatever PHP did with them
        ctx_.uploads = nullptr;
        // SIGTERM may have come while PHP worked: then say Connection: close.
        bool keep_alive = ex.keep_alive && !st_.draining;
        const bool head_request = req.method == "HEAD";
        switch (res.outcome) {
        case pool::Outcome::ok:
            if (http.sendfile && !res.streamed && !res.written) {
                if (auto path = take_sendfile(res.response)) {
                    const int status = final_status(res.response.status, res.worker_pid);
                    After sent =
                        co_await send_named_file(ex, res.response, status, *path, res.worker_pid, keep_alive);
                    keep_alive = keep_alive && sent == After::keep_alive;
                    break;
                }
            }
            if (sink.spilled()) {
                if (!co_await sink.send_spilled(res.response, res.worker_pid))
                    keep_alive = false;
            } else if (!res.streamed && !res.written) {
                std::string_view answer =
                    res.body_frame.data ? res.taken_body() : std::string_view(body_out_);
                if (auto rest = sink.prepare_whole(res.response, answer, res.worker_pid, ex.may_batch)) {
                    // Written here rather than in a helper coroutine: one coroutine frame less per request.
                    std::array<asio::const_buffer, 2> bufs{asio::buffer(ex.out),
                                                           asio::buffer(rest->data(), rest->size())};
                    if (!co_await ex.transport.write(bufs))
                        keep_alive = false;
                    ex.out.clear();
                }
            }
            keep_alive = keep_alive && sink.keep_alive();
            break;
        case pool::Outcome::worker_error:
        case pool::Outcome::bad_response:
        case pool::Outcome::worker_crashed:
        case pool::Outcome::timed_out:
        case pool::Outcome::no_worker: {
            const Failure f = failure_for(res.outcome, http.internal_error_code);
            if (res.outcome == pool::Outcome::bad_response)
                count_limit(LimitEvent::response_head);
            // The cause (boot errors, PHP's stderr, pids) is for the log, not for the client; a crash was
            // logged by the pool, an ERROR frame's text by the worker.
            if (res.outcome != pool::Outcome::worker_error && res.outcome != pool::Outcome::worker_crashed)
                log::warn("http", describe(ex) + ": " + std::to_string(f.status) + ": " + res.message);
            if (sink.started()) {
                keep_alive = false; // the response is cut short: closing tells the client
                break;
            }
            ex.status = f.status;
            append_error(ex.out, f.status, f.text, keep_alive, head_request);
            break;
        }
        case pool::Outcome::client_gone:
            log::debug("http", describe(ex) + ": not executed: " + res.message);
            keep_alive = false;
            ex.out.clear();
            break;
        case pool::Outcome::cancelled:
            keep_alive = false;
            break;
        }
        co_return keep_alive ? After::keep_alive : After::close;
    }

private:
    SharedState &st_;
    pool::Pool &pool_;
    RequestBody body_;
    FormBody form_body_;
    relay::FormTree form_;
    bool is_form_ = false;      // the request being served is a urlencoded form the server parses
    bool is_multipart_ = false; // ... a multipart form
    // Created at a multipart request, dropped when the connection is idle: most connections never carry one,
    // and an idle connection keeps ~0.9 KiB less (bench/idle_memory.py).
    std::unique_ptr<MultipartBody> multipart_;
    const TrustedProxies &proxies_;
    relay::RequestContext ctx_;
    std::string body_out_;
};

} // namespace

void build_request_context(relay::RequestContext &ctx, const Request &req, const std::string &remote,
                           std::string_view default_host)
{
    build_context(ctx, req, remote, default_host);
}

PhpHandler::PhpHandler(SharedState &state, pool::Pool &pool)
    : state_(state), pool_(pool), proxies_(state.config.http.trusted_subnets)
{
}

std::unique_ptr<Handler::Connection> PhpHandler::connect()
{
    return std::make_unique<PhpConnection>(state_, pool_, proxies_);
}

} // namespace ferry::server::detail
