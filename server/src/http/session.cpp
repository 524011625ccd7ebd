// One HTTP/1.1 connection: parse, route each request to its handler at the head, answer in request order,
// keep alive, pipeline, time out, close politely.
#include "control/limit_metrics.hpp"
#include "ferry/base/log.hpp"
#include "h2/connection.hpp"
#include "handlers/handler.hpp"
#include "response.hpp"
#include "shared_state.hpp"
#include "tls/tls_context.hpp"

#include <memory>
#include <optional>
#include <vector>

namespace ferry::server::detail {
namespace {

constexpr std::size_t flush_threshold = 64 * 1024;

// The handlers' state on this connection, created the first time each serves a request here.
class HandlerStates {
public:
    explicit HandlerStates(const Router &router) : router_(router) {}

    Handler::Connection *get(int index)
    {
        if (states_.empty())
            states_.resize(router_.size());
        auto &s = states_[static_cast<std::size_t>(index)];
        if (!s)
            s = router_.at(index).connect();
        return s.get();
    }
    void release_idle_memory(bool large_head)
    {
        for (auto &s : states_)
            if (s)
                s->release_idle_memory(large_head);
    }

private:
    const Router &router_;
    std::vector<std::unique_ptr<Handler::Connection>> states_;
};

// A connection waiting for its next request keeps only small buffers: whatever a large
// request or response made it hold goes back. Small ones stay, so ordinary keep-alive traffic reuses them.
void release_idle_memory(std::string &out, HttpParser &parser, HandlerStates &handlers)
{
    constexpr std::size_t keep = 4096;
    if (out.capacity() > keep)
        std::string().swap(out);
    bool large_head = parser.last_head_size() > keep;
    handlers.release_idle_memory(large_head);
    if (large_head || parser.buffer_capacity() > 8192)
        parser.release_memory();
}

void log_parse_error(const std::string &remote, const HttpParser &parser)
{
    auto lvl = parser.error_status() >= 500 ? log::Level::error : log::Level::info;
    if (log::enabled(lvl))
        log::write(lvl, "http",
                   remote + ": " + std::to_string(parser.error_status()) + " " + parser.error_message());
}

} // namespace

// A request done (SharedState::observe): /metrics' counts, the access log's line.
void observed(SharedState &st, const Wire &tr, const Request &req, int status, int worker_pid,
              steady::time_point started, std::uint64_t bytes)
{
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - started);
    st.http_stats.record(status, static_cast<std::uint64_t>(us.count()), bytes);
    if (st.config.http.access_logs)
        log::access({tr.remote(), req.method, req.target, status, bytes, us, worker_pid});
}

awaitable<void> http_session(SharedState &st, StreamSocket sock)
{
    return http_session(st, std::move(sock), st.http_site, nullptr); // no coroutine frame of its own
}

awaitable<void> http_session(SharedState &st, StreamSocket sock, const Site &site, ConnSlots::Lease *lease)
{
    const auto &http = st.config.http;
    Transport tr(st.connections, std::move(sock), http.write_timeout);
    Conn &conn = tr.conn();
    if (site.tls && !co_await tr.handshake(*site.tls))
        co_return;
    if (site.tls && tls_selected_h2(tr.tls())) {
        co_await h2::serve(st, tr, site, lease, {});
        co_await tr.shut_down(false, {}); // close_notify, FIN
        co_return;
    }
    // h2c by prior knowledge: its preface opens with "PRI " where a request line would be.
    bool sniff_h2c = st.config.http.h2c && !site.tls && &site == &st.http_site;
    HttpParser parser(*site.limits);
    parser.set_buffer_budget(st.head_budget);
    HandlerStates handlers(*site.router);
    const bool observe = st.observe && site.observed;
    const auto draining = [&st, &site] { return site.drains && st.draining; };
    bool spoke = false;                     // a byte came
    bool idle = true;                       // waiting for the first byte of a request
    Handler::Connection *handler = nullptr; // serves the request being read; null: none accepts it
    std::string out;
    unsigned batched = 0;
    bool linger = false; // the client may still be sending: drain before closing so it reads our answer
    std::optional<steady::time_point> header_deadline;
    // The body being read: when its first read was awaited and the bytes read since (min_body_rate).
    std::optional<steady::time_point> body_started;
    std::uint64_t body_read = 0;
    bool slow_body = false;     // the read that timed out was cut by min_body_rate, not by read_body
    steady::time_point started; // this request's head (observe)
    std::uint64_t mark = 0;     // bytes written or queued before its answer (observe)

    for (;;) {
        auto ev = parser.next();
        if (ev == HttpParser::Event::need_more) {
            if (!co_await tr.flush(out))
                break;
            batched = 0;
            if (draining() && parser.idle())
                break;
            idle = parser.idle();
            conn.idle = idle && site.drains; // a stop closes it (an admin connection waits for its own)
            // read_header covers the whole header from its first byte (no slowloris trickle);
            // idle and read_body restart at every read; a body must also average min_body_rate once
            // read_body has passed since its first read (a trickle of a byte a second would otherwise hold
            // its memory, its temp file and its connection for as long as it likes).
            slow_body = false;
            if (idle) {
                header_deadline.reset();
                body_started.reset();
                tr.arm(spoke ? site.idle : site.first_byte);
                release_idle_memory(out, parser, handlers);
            } else if (parser.in_body()) {
                header_deadline.reset();
                const auto now = steady::now();
                if (!body_started) {
                    body_started = now;
                    body_read = 0;
                }
                auto deadline = now + http.read_body_timeout;
                if (http.min_body_rate > 0) {
                    auto by_rate = *body_started + http.read_body_timeout +
                                   std::chrono::milliseconds(body_read * 1000 / http.min_body_rate);
                    if (by_rate < deadline) {
                        deadline = by_rate;
                        slow_body = true;
                    }
                }
                tr.arm_at(deadline);
            } else {
                if (!header_deadline)
                    header_deadline = steady::now() + site.read_header;
                tr.arm_at(*header_deadline);
            }
            auto [rec, n] = co_await tr.read_some(parser.prepare());
            tr.disarm();
            if (rec) {
                if (conn.timed_out && !spoke && lease)
                    lease->first_byte_timeout(tr.remote());
                if (conn.timed_out && !parser.idle()) {
                    if (slow_body) {
                        st.counters.limits.count(LimitEvent::slow_body);
                        log::info("http", tr.remote() +
                                              ": request body slower than http.limits.min_body_rate (" +
                                              std::to_string(http.min_body_rate) + " bytes/s, " +
                                              std::to_string(body_read) + " bytes read), sending 408");
                    } else {
                        log::info("http", tr.remote() + ": timed out reading the request, sending 408");
                    }
                    conn.timed_out = false;
                    append_error(out, 408, "timed out reading the request", false, false);
                    if (observe)
                        st.http_stats.record_refused(408);
                    co_await tr.flush(out);
                }
                break;
            }
            parser.commit(n);
            if (sniff_h2c) {
                std::string_view first = parser.peek_buffered();
                if (first.size() >= 4 || !std::string_view("PRI ").starts_with(first)) {
                    sniff_h2c = false;
                    if (first.starts_with("PRI ")) {
                        std::string received(parser.take_buffered());
                        co_await h2::serve(st, tr, site, lease, received);
                        break;
                    }
                }
            }
            if (body_started)
                body_read += n;
            conn.idle = idle = false;
            if (!spoke && lease)
                lease->spoke();
            spoke = true;
            continue;
        }
        if (ev == HttpParser::Event::head) {
            const Request &req = parser.request();
            if (observe) {
                started = steady::now();
                mark = tr.sent() + out.size();
            }
            int index = site.router->select(req);
            handler = index < 0 ? nullptr : handlers.get(index);
            parser.set_body_sink(handler ? handler->body_sink(req) : nullptr);
            // Only a client still waiting for the go-ahead gets it (RFC 9110 §10.1.1 lets us skip it
            // once body bytes have come).
            if (req.expect_continue && !parser.has_buffered()) {
                out += "HTTP/1.1 100 Continue\r\n\r\n";
                if (!co_await tr.flush(out))
                    break;
            }
            continue;
        }
        if (ev == HttpParser::Event::error) {
            log_parse_error(tr.remote(), parser);
            if (parser.buffer_refused())
                st.counters.limits.count(LimitEvent::head_memory);
            if (observe)
                st.http_stats.record_refused(parser.error_status());
            // A 4xx names what was wrong with the client's own request; a 5xx (a temp file that cannot be
            // written) says nothing of the server's paths: that is for the log line.
            append_error(out, parser.error_status(),
                         parser.error_status() >= 500 ? std::string() : parser.error_message(), false, false);
            co_await tr.flush(out);
            linger = true;
            break;
        }

        // A whole request.
        const Request &req = parser.request();
        if (req.upgrade && st.config.http.h2c && &site == &st.http_site && h2::upgrade_requested(req)) {
            out += "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
            if (!co_await tr.flush(out))
                break;
            std::string received(parser.take_buffered());
            co_await h2::serve_upgraded(st, tr, site, std::move(parser.request()), received);
            break;
        }
        bool keep_alive = req.keep_alive && !draining() && !req.upgrade;
        After after;
        int status = 404, worker_pid = 0;
        if (lease)
            lease->busy(true);
        if (handler) {
            Exchange ex{req, tr, &parser, out, parser.has_buffered(), keep_alive};
            after = co_await handler->handle(ex);
            status = ex.status;
            worker_pid = ex.worker_pid;
        } else {
            append_error(out, 404, "no handler serves this request", keep_alive, req.method == "HEAD");
            after = keep_alive ? After::keep_alive : After::close;
        }
        if (lease)
            lease->busy(false);
        if (observe)
            observed(st, tr, req, status, worker_pid, started, tr.sent() + out.size() - mark);
        header_deadline.reset();
        body_started.reset();
        if (after == After::ended)
            co_return;
        parser.done();
        if (after == After::close || draining()) {
            co_await tr.flush(out);
            linger = parser.has_buffered();
            break;
        }
        ++batched;
        if (!parser.has_buffered() || out.size() >= flush_threshold || batched >= http.max_pipelined) {
            if (!co_await tr.flush(out))
                break;
            batched = 0;
        }
    }
    // The parser's free space serves as scratch (an array here would sit in every session's frame).
    co_await tr.shut_down(linger, parser.prepare());
}

} // namespace ferry::server::detail
