// One HTTP/2 connection: nghttp2's server session fed by a reader and drained by a writer, both on the
// connection's Transport; each complete request runs its handler as a task of its own (h2/stream.hpp), so a
// slow PHP request never holds the others. Limits: docs/http2.md.
#include "h2/connection.hpp"

#include "control/limit_metrics.hpp"
#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "h2/stream.hpp"
#include "http/response.hpp"
#include "shared_state.hpp"

#include <nghttp2/nghttp2.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <algorithm>
#include <array>
#include <charconv>

namespace ferry::server::detail::h2 {

namespace {

constexpr std::int32_t stream_window = 256 * 1024;  // what a client may send ahead on one stream
constexpr std::int32_t connection_window = 1 << 20; // and on all together
constexpr std::size_t write_batch = 64 * 1024;      // frames gathered into one write

} // namespace

Connection::Connection(SharedState &st, Transport &tr, const Site &site, ConnSlots::Lease *lease)
    : st_(st), tr_(tr), site_(site), lease_(lease), wake_(st.io)
{
    ng_ = new_session();
}

Connection::~Connection()
{
    nghttp2_session_del(ng_);
}

void Connection::count_reset()
{
    const auto now = steady::now();
    if (resets_at_ != steady::time_point()) {
        const double elapsed = std::chrono::duration<double>(now - resets_at_).count();
        reset_tokens_ = std::min<double>(reset_burst, reset_tokens_ + elapsed * reset_rate);
    }
    resets_at_ = now;
    if (reset_tokens_ >= 1) {
        reset_tokens_ -= 1;
        return;
    }
    if (nghttp2_session_want_read(ng_)) { // once
        log::info("http2", tr_.remote() + ": streams reset faster than " + std::to_string(reset_rate) +
                               " a second after a burst of " + std::to_string(reset_burst) +
                               " (rapid reset): closing with ENHANCE_YOUR_CALM");
        st_.counters.limits.count(LimitEvent::http2_abuse);
        nghttp2_session_terminate_session(ng_, NGHTTP2_ENHANCE_YOUR_CALM);
    }
}

void Connection::wake()
{
    woken_ = true;
    if (writer_waiting_)
        wake_.cancel();
}

H2Stream *Connection::begin_stream(std::int32_t id)
{
    const unsigned max = st_.config.http.max_concurrent_streams;
    if (st_.draining || running_ >= max) {
        // Open streams are capped by nghttp2 from our SETTINGS; these are requests whose streams the client
        // reset while their handlers still run. A client that keeps opening them is told to calm down.
        nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
        if (!st_.draining && ++refusals_ > 2 * max) {
            log::info("http2", tr_.remote() + ": " + std::to_string(refusals_) + " streams refused with " +
                                   std::to_string(running_) +
                                   " requests running (http.http2.max_concurrent_streams): closing");
            st_.counters.limits.count(LimitEvent::http2_abuse);
            nghttp2_session_terminate_session(ng_, NGHTTP2_ENHANCE_YOUR_CALM);
        }
        return nullptr;
    }
    auto s = std::make_unique<H2Stream>(*this, id);
    H2Stream *p = s.get();
    s->request.version_major = 2;
    s->request.version_minor = 0;
    streams_.emplace(id, std::move(s));
    nghttp2_session_set_stream_user_data(ng_, id, p);
    spoke_ = true;
    return p;
}

void Connection::head_done(H2Stream &s)
{
    Request &req = s.request;
    if (s.refused) {
        refuse(s, s.refused,
               s.refused == 503
                   ? "http.limits.max_head_memory is spent: the request's header fields cannot be held"
                   : "the request's header fields are larger than http.limits.max_header_size");
        return;
    }
    if (req.method ==
        "CONNECT") { // no tunnels (and no extended CONNECT: SETTINGS_ENABLE_CONNECT_PROTOCOL off)
        refuse(s, 405, "CONNECT is not supported");
        return;
    }
    if (!req.authority.empty() && req.header("host").empty())
        req.headers.emplace_back("host", req.authority);
    req.form = req.target == "*" ? TargetForm::asterisk : TargetForm::origin;
    req.keep_alive = true;
    const int index = site_.router->select(req);
    s.handler_index = index;
    if (index >= 0) {
        if (idle_handlers_.empty())
            idle_handlers_.resize(site_.router->size());
        auto &idle = idle_handlers_[static_cast<std::size_t>(index)];
        if (!idle.empty()) {
            s.handler = std::move(idle.back());
            idle.pop_back();
        } else {
            s.handler = site_.router->at(index).connect();
        }
        s.sink = s.handler->body_sink(req);
        if (s.sink) {
            std::uint64_t length = 0;
            auto cl = req.header("content-length");
            std::from_chars(cl.data(), cl.data() + cl.size(), length);
            s.sink->begin(length);
        }
    }
    if (iequals(req.header("expect"), "100-continue")) {
        const nghttp2_nv nv{const_cast<std::uint8_t *>(reinterpret_cast<const std::uint8_t *>(":status")),
                            const_cast<std::uint8_t *>(reinterpret_cast<const std::uint8_t *>("100")), 7, 3,
                            NGHTTP2_NV_FLAG_NONE};
        nghttp2_submit_headers(ng_, NGHTTP2_FLAG_NONE, s.id(), nullptr, &nv, 1, nullptr);
    }
}

void Connection::refuse(H2Stream &s, int status, std::string_view detail)
{
    s.refused = status;
    s.sink = nullptr;
    s.handler.reset(); // whatever its body sink holds (a temp file) goes with it
    log::info("http2", tr_.remote() + ": stream " + std::to_string(s.id()) + " " + s.request.method + " " +
                           s.request.target + ": " + std::to_string(status) + " " + std::string(detail));
    if (st_.observe && site_.observed)
        st_.http_stats.record_refused(status);
    std::string bytes;
    append_error(bytes, status, status >= 500 ? std::string_view() : detail, true,
                 s.request.method == "HEAD");
    s.answer(bytes);
}

void Connection::resume(H2Stream &s)
{
    nghttp2_session_resume_data(ng_, s.id());
    wake();
}

void Connection::reset(H2Stream &s, std::uint32_t code)
{
    if (s.open)
        nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, s.id(), code);
    s.closed(code); // no more writes: the close callback comes when the frame is sent
    wake();
}

void Connection::track(H2Stream &s)
{
    if (s.users++ == 0)
        ++running_;
}

void Connection::release(H2Stream &s)
{
    if (--s.users > 0)
        return;
    --running_;
    refusals_ = 0;
    if (s.handler && s.handler_index >= 0) {
        s.handler->release_idle_memory(false);
        idle_handlers_[static_cast<std::size_t>(s.handler_index)].push_back(std::move(s.handler));
    }
    if (s.finished)
        forget(s);
    if (running_ == 0 && (ending_ || st_.draining))
        tr_.stream().cancel(); // the reader ends: nothing runs, and nothing new may start
    wake();
}

void Connection::forget(H2Stream &s)
{
    streams_.erase(s.id());
}

void Connection::dispatch()
{
    for (H2Stream *s : ready_) {
        s->ready = false;
        if (!s->open) { // reset in the same read that completed it: it costs no request
            if (s->finished)
                forget(*s);
            continue;
        }
        track(*s);
        asio::co_spawn(st_.io, handle(s, tasks_.enter_anyway()), asio::detached);
    }
    ready_.clear();
}

awaitable<void> Connection::handle(H2Stream *s, TaskGroup::Hold)
{
    const Request &req = s->request;
    const bool observe = st_.observe && site_.observed;
    const auto started = observe ? steady::now() : steady::time_point();
    int status = 404, pid = 0;
    if (s->handler) {
        Exchange ex{req, *s, nullptr, s->out, false, !st_.draining};
        co_await s->handler->handle(ex);
        status = ex.status;
        pid = ex.worker_pid;
    } else {
        append_error(s->out, 404, "no handler serves this request", true, req.method == "HEAD");
    }
    s->finish();
    if (observe)
        observed(st_, *s, req, status, pid, started, s->sent());
    release(*s);
}

void Connection::set_deadline()
{
    Conn &c = tr_.conn();
    const bool quiet = running_ == 0 && streams_.empty();
    c.idle = quiet && site_.drains;
    if (quiet) {
        tr_.arm(site_.idle);
    } else if (running_ == 0) {
        tr_.arm(st_.config.http.read_body_timeout); // streams wait for the rest of their requests
    } else {
        tr_.disarm(); // handlers run: their own limits (and the writes' timeout) apply
    }
}

awaitable<void> Connection::writer(TaskGroup::Hold)
{
    for (;;) {
        for (;;) {
            const std::uint8_t *data = nullptr;
            const ssize_t n = nghttp2_session_mem_send(ng_, &data);
            if (n < 0) {
                log::error("http2", tr_.remote() + ": " + nghttp2_strerror(static_cast<int>(n)));
                ending_ = true;
                break;
            }
            if (n == 0)
                break;
            if (wbuf_.empty() && n > 1024)
                wbuf_.reserve(write_batch + 16 * 1024 + 64); // at most a batch and a frame: never regrown
            wbuf_.append(reinterpret_cast<const char *>(data), static_cast<std::size_t>(n));
            if (wbuf_.size() >= write_batch)
                break;
        }
        if (!wbuf_.empty()) {
            std::array<asio::const_buffer, 1> b{asio::buffer(wbuf_)};
            const bool ok = co_await tr_.write(b);
            wbuf_.clear();
            if (!ok) {
                ending_ = true;
                tr_.stream().cancel();
                break;
            }
            if (!ending_)
                set_deadline();
            continue;
        }
        if (ending_ || (!nghttp2_session_want_read(ng_) && !nghttp2_session_want_write(ng_)))
            break;
        if (streams_.empty() && wbuf_.capacity() > 16 * 1024)
            std::string().swap(wbuf_); // a quiet connection keeps no write buffer beyond 16 KiB
        if (!woken_) {
            writer_waiting_ = true;
            wake_.expires_at(steady::time_point::max());
            co_await wake_.async_wait(nothrow);
            writer_waiting_ = false;
        }
        woken_ = false;
    }
    if (!ending_) { // the session is over (GOAWAY both ways): the reader stops
        ending_ = true;
        tr_.stream().cancel();
    }
}

awaitable<std::pair<error_code, std::size_t>> Connection::read()
{
    // Wait until there is something, then read it into the loop's scratch, which mem_recv consumes before
    // this coroutine waits again: an idle connection holds no read buffer (nginx's model).
    detail::Stream &stream = tr_.stream();
    for (;;) {
        const Io r = stream.read(std::span(st_.scratch.data(), st_.scratch.size()));
        if (r.status == Io::done)
            co_return std::pair{error_code{}, r.n};
        if (r.status == Io::eof)
            co_return std::pair{error_code(asio::error::eof), std::size_t{0}};
        if (r.status == Io::failed)
            co_return std::pair{error_code(r.error, asio::error::get_system_category()), std::size_t{0}};
        auto [ec] = co_await stream.async_wait(r.status, nothrow);
        if (ec)
            co_return std::pair{ec, std::size_t{0}};
    }
}

awaitable<void> Connection::run(std::string_view received)
{
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, st_.config.http.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(stream_window)},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(site_.limits->max_header_size)},
    };
    nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0, connection_window);
    asio::co_spawn(st_.io, writer(tasks_.enter_anyway()), asio::detached);
    dispatch(); // an upgrade's stream 1

    std::string_view input = received;
    bool goaway = false;
    for (;;) {
        if (!input.empty()) {
            const auto rv = nghttp2_session_mem_recv(
                ng_, reinterpret_cast<const std::uint8_t *>(input.data()), input.size());
            if (rv < 0) {
                log::info("http2",
                          tr_.remote() + ": " + nghttp2_strerror(static_cast<int>(rv)) + ": closing");
                // A flood of frames to acknowledge, or of CONTINUATION frames (CVE-2024-27316): nginx's
                // answer.
                const bool abuse = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
                if (abuse)
                    st_.counters.limits.count(LimitEvent::http2_abuse);
                nghttp2_session_terminate_session(ng_,
                                                  abuse ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
                break;
            }
            dispatch();
            wake();
        }
        if (ending_ || (!nghttp2_session_want_read(ng_) && !nghttp2_session_want_write(ng_)))
            break;
        if (st_.draining && !goaway) {
            goaway = true;
            nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_),
                                  NGHTTP2_NO_ERROR, nullptr, 0);
            wake();
        }
        if (st_.draining && running_ == 0)
            break;
        set_deadline();
        const auto [ec, n] = co_await read();
        tr_.disarm();
        if (ec) {
            if (tr_.conn().timed_out) {
                tr_.conn().timed_out = false;
                if (!streams_.empty())
                    log::info("http2",
                              tr_.remote() + ": " + std::to_string(streams_.size()) +
                                  " streams' requests incomplete for http.timeouts.read_body: closing");
                nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_),
                                      NGHTTP2_NO_ERROR, nullptr, 0);
            } else if (st_.draining && !goaway) {
                nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_),
                                      NGHTTP2_NO_ERROR, nullptr, 0);
            }
            break;
        }
        input = std::string_view(st_.scratch.data(), n);
    }
    // The writer sends what is queued (a GOAWAY) and stops; every stream still open ends, so handlers
    // writing to them return; then all of them are joined. The streams themselves go with the connection
    // (nghttp2 may still read a stream's data while the writer sends its last frames).
    ending_ = true;
    wake();
    for (auto &[id, s] : streams_)
        s->closed(NGHTTP2_CANCEL);
    ready_.clear();
    co_await tasks_.join(steady::time_point::max());
}

awaitable<void> serve(SharedState &st, Transport &tr, const Site &site, ConnSlots::Lease *lease,
                      std::string_view received)
{
    auto c = std::make_unique<Connection>(st, tr, site, lease);
    co_await c->run(received);
}

} // namespace ferry::server::detail::h2
