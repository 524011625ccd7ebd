#include "php.hpp"

#include "control/limit_metrics.hpp"
#include "failure.hpp"
#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "forms/form_body.hpp"
#include "forms/multipart_body.hpp"
#include "forms/urlencoded.hpp"
#include "http/response.hpp"
#include "php_response.hpp"
#include "proxies.hpp"
#include "request_body.hpp"
#include "sendfile.hpp"
#include "shared_state.hpp"
#include "tls/tls_context.hpp"

#include <algorithm>
#include <array>
#include <optional>

namespace ferry::server::detail {
namespace {

void build_context(relay::RequestContext &ctx, const Request &req, const std::string &remote,
                   std::string_view default_host, SSL *tls, bool sendfile = false)
{
    ctx.remote_addr = remote;
    ctx.protocol = req.version_major == 2 ? "HTTP/2.0" : req.http10() ? "HTTP/1.0" : "HTTP/1.1";
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
        ctx.uri.assign(tls ? "https://" : "http://");
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
    ctx.attributes.clear();
    if (tls)
        add_tls_attributes(tls, ctx.attributes);
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
        reply_.release_memory();
        if (large_head && retained(ctx_) > 4096)
            ctx_ = relay::RequestContext{};
    }

    awaitable<After> handle(Exchange &ex) override
    {
        const auto &http = st_.config.http;
        const Request &req = ex.request;
        build_context(ctx_, req, ex.transport.remote(), st_.default_host, ex.transport.tls(), http.sendfile);
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
        co_await pool_.exec(ctx_, body, reply_, pool::Client{ex.transport.native_handle()}, st_.loop);
        ex.worker_pid = reply_.worker_pid;
        // SIGTERM may have come while PHP worked: then say Connection: close.
        bool keep_alive = ex.keep_alive && !st_.draining;
        ResponseWriter writer(st_, ex, keep_alive);
        // (GCC 12: a co_await in an unbraced if-body or a condition breaks the frame; braces, plain
        // statements.)
        bool client_there = true;
        if (reply_.outcome == pool::Outcome::ok && reply_.informational()) {
            client_there = co_await writer.informational(&reply_);
        }
        std::optional<std::string> path;
        if (reply_.outcome == pool::Outcome::ok && client_there && http.sendfile && !reply_.more())
            path = take_sendfile(reply_.response);
        if (!client_there) {
            keep_alive = false; // the client left during a 1xx
        } else if (path) {      // the file is sent after the worker is free
            reply_.finish();
            const int status = final_status(reply_.response.status, reply_.worker_pid);
            const After sent = co_await send_named_file(ex, reply_.response, status, *path, reply_.worker_pid,
                                                        keep_alive, st_.counters.descriptors);
            keep_alive = keep_alive && sent == After::keep_alive;
        } else if (reply_.outcome == pool::Outcome::ok && !reply_.more() && !reply_.holds_worker() &&
                   !declares_trailers(reply_.response) && writer.whole_at_once(reply_)) {
            // The common case, written here rather than in a helper coroutine: one coroutine frame less per
            // request.
            if (writer.compresses(reply_)) {
                // What is queued on the loop goes first (the next request for the worker just freed): the
                // workers do not wait while this body is compressed.
                co_await compress::yield_to_loop();
            }
            if (std::optional<std::string_view> rest = writer.prepare_whole(reply_)) {
                std::array<asio::const_buffer, 2> bufs{asio::buffer(ex.out),
                                                       asio::buffer(rest->data(), rest->size())};
                const bool wrote = co_await ex.transport.write(bufs);
                ex.out.clear();
                keep_alive = keep_alive && wrote;
            }
            keep_alive = keep_alive && writer.keep_alive();
        } else if (reply_.outcome == pool::Outcome::ok) {
            keep_alive = co_await writer.write(&reply_);
        }
        if (reply_.outcome != pool::Outcome::ok)
            keep_alive = failed(ex, reply_, writer.started()) && keep_alive;
        reply_.finish();
        body_.clear();
        if (is_form_) {
            form_.clear();
            form_body_.clear();
        }
        if (is_multipart_)
            multipart_->clear(); // the temp files go, whatever PHP did with them
        ctx_.uploads = nullptr;
        co_return keep_alive ? After::keep_alive : After::close;
    }

private:
    // A reply that failed (before its head, or mid-stream: `started`): the client's answer (an error status,
    // or a response cut short by the close), and the log line. False when the connection must close.
    bool failed(Exchange &ex, const pool::Reply &res, bool started)
    {
        if (res.outcome == pool::Outcome::client_gone) {
            log::debug("http", describe(ex) + ": not executed: " + res.message);
            ex.out.clear();
            return false;
        }
        const Failure f = failure_for(res.outcome, st_.config.http.internal_error_code);
        if (res.outcome == pool::Outcome::bad_response)
            st_.counters.limits.count(LimitEvent::response_head);
        // The cause (boot errors, PHP's stderr, pids) is for the log, not for the client; a crash was logged
        // by the pool, an ERROR frame's text by the worker.
        if (res.outcome != pool::Outcome::worker_error && res.outcome != pool::Outcome::worker_crashed)
            log::warn("http", describe(ex) + ": " + std::to_string(f.status) + ": " + res.message);
        if (started)
            return false; // the response is cut short: closing tells the client
        const bool keep_alive = ex.keep_alive && !st_.draining;
        ex.status = f.status;
        append_error(ex.out, f.status, f.text, keep_alive, ex.request.method == "HEAD");
        return keep_alive;
    }

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
    pool::Reply reply_; // kept from one request to the next: its copy buffer is reused
};

} // namespace

void build_request_context(relay::RequestContext &ctx, const Request &req, const std::string &remote,
                           std::string_view default_host, SSL *tls)
{
    build_context(ctx, req, remote, default_host, tls);
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
