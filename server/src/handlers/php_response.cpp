#include "php_response.hpp"

#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "http/response.hpp"
#include "request_body.hpp"
#include "shared_state.hpp"
#include "transport/transport.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

constexpr std::size_t inline_body_max = 32 * 1024; // larger bodies are written straight from their buffer

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

} // namespace

int final_status(int status, int pid)
{
    if (status >= 200 && status <= 599)
        return status;
    log::error("http", "worker " + std::to_string(pid) + " answered with invalid status " +
                           std::to_string(status) + ", sending 500");
    return 500;
}

ResponseWriter::ResponseWriter(const SharedState &st, Exchange &ex, bool keep_alive)
    : st_(st), ex_(ex), stream_(ex.transport, ex.out, ex.request), head_request_(ex.request.method == "HEAD"),
      keep_alive_(keep_alive)
{
}

ResponseWriter::~ResponseWriter()
{
    if (spill_fd_ >= 0)
        ::close(spill_fd_);
}

awaitable<bool> ResponseWriter::informational(pool::Reply *r)
{
    pool::Reply &reply = *r;
    while (reply.outcome == pool::Outcome::ok && reply.informational()) {
        if (!co_await stream_.informational(reply.response.status, &reply.response)) {
            reply.finish();
            co_return false;
        }
        co_await reply.next();
    }
    co_return true;
}

std::optional<std::string_view> ResponseWriter::prepare_whole(const pool::Reply &reply)
{
    std::string_view body = reply.body();
    if (!append_whole_head(reply.response, body.size(), reply.worker_pid))
        body = {};
    if (ex_.may_batch && body.size() <= inline_body_max) {
        ex_.out.append(body.data(), body.size()); // goes out with the next pipelined answer
        return std::nullopt;
    }
    return body;
}

awaitable<bool> ResponseWriter::write(pool::Reply *r)
{
    pool::Reply &reply = *r;
    // (GCC 12: no co_await in a conditional expression or an unbraced if-body; it breaks the frame.)
    bool ok = false;
    if (reply.more() || !declared_trailers(reply.response).empty()) {
        ok = co_await write_stream(&reply);
    } else {
        ok = co_await write_held(&reply);
    }
    reply.finish();
    co_return ok &&keep_alive();
}

awaitable<bool> ResponseWriter::write_stream(pool::Reply *r)
{
    pool::Reply &reply = *r;
    Head h;
    h.status = final_status(reply.response.status, reply.worker_pid);
    ex_.status = h.status;
    h.worker = &reply.response;
    h.keep_alive = keep_alive_ && !st_.draining;
    const std::vector<std::string> trailers = declared_trailers(reply.response);
    if (!trailers.empty()) {
        h.trailers = &trailers;
        stream_.set_trailers(trailer_lines(reply.response, trailers));
    }
    stream_.start(h);
    for (;;) {
        const bool last = !reply.more();
        const bool wrote = co_await stream_.write(reply.body(), last);
        if (!wrote)
            co_return false;
        if (last)
            co_return true;
        co_await reply.next();
        if (reply.outcome != pool::Outcome::ok)
            co_return false; // cut short: closing tells the client
    }
}

awaitable<bool> ResponseWriter::write_held(pool::Reply *r)
{
    pool::Reply &reply = *r;
    std::string_view body = reply.body();
    if (!body.empty() && !head_request_ && spill(body)) {
        // Over the body budget, in the worker's buffer: the worker is free once it is on disk.
        reply.finish();
        if (!append_whole_head(reply.response, spill_size_, reply.worker_pid))
            co_return true;
        const bool flushed = co_await ex_.transport.flush(ex_.out, true);
        if (!flushed)
            co_return false;
        const auto sent = co_await ex_.transport.send_file(spill_fd_, 0, spill_size_);
        co_return sent == Transport::Sent::all;
    }
    // Only if no temp file can be had is a held body written while the worker waits.
    std::optional<std::string_view> rest = prepare_whole(reply);
    if (!rest)
        co_return true;
    std::array<asio::const_buffer, 2> bufs{asio::buffer(ex_.out), asio::buffer(rest->data(), rest->size())};
    const bool ok = co_await ex_.transport.write(bufs);
    ex_.out.clear();
    co_return ok;
}

bool ResponseWriter::append_whole_head(const relay::ResponseContext &rc, std::size_t size, int worker_pid)
{
    Head h;
    h.status = final_status(rc.status, worker_pid);
    ex_.status = h.status;
    h.worker = &rc;
    if (st_.draining)
        keep_alive_ = false;
    h.keep_alive = keep_alive_;
    h.http10 = ex_.request.http10();
    bool no_body = no_body_status(h.status);
    h.framing = no_body ? Framing::none : Framing::length;
    h.content_length = size;
    if (head_request_ && size == 0)
        h.content_length = head_content_length(rc, 0);
    int dropped = 0;
    append_head(ex_.out, h, &dropped);
    if (dropped > 0)
        log::warn("http", "worker " + std::to_string(worker_pid) + ": dropped " + std::to_string(dropped) +
                              " response header(s) with an invalid name or a CR/LF/NUL in the value");
    return !(head_request_ || no_body || size == 0);
}

bool ResponseWriter::spill(std::string_view body)
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
            spill_size_ = 0;
            return false;
        }
        spill_size_ += static_cast<std::size_t>(n);
        body.remove_prefix(static_cast<std::size_t>(n));
    }
    spill_fd_ = fd;
    return true;
}

} // namespace ferry::server::detail
