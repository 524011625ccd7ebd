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
    if (encoder_) {
        st_.counters.compression.compressed(encoder_->coding(), stream_.bytes_in() + encoded_in_,
                                            stream_.bytes_out() + encoded_out_);
        st_.counters.compression.give_stream();
    }
}

const compress::Plan &ResponseWriter::plan(const pool::Reply &reply)
{
    if (planned_)
        return plan_;
    planned_ = true;
    const int status = reply.response.status;
    if (!st_.config.http.compression.enabled || status < 200 || status > 599)
        return plan_;
    std::optional<std::size_t> whole;
    if (!reply.more() && !declares_trailers(reply.response))
        whole = reply.body().size();
    plan_ = compress::plan(st_.config.http.compression, ex_.request, reply.response, status, whole);
    return plan_;
}

bool ResponseWriter::whole_at_once(const pool::Reply &reply)
{
    return plan(reply).coding == compress::Coding::identity || reply.body().size() <= compress::slice_size;
}

int ResponseWriter::level() const
{
    const auto &c = st_.config.http.compression;
    return plan_.coding == compress::Coding::br ? c.brotli_quality : c.gzip_level;
}

bool ResponseWriter::take_encoder(std::size_t size_hint)
{
    if (!st_.counters.compression.take_stream(st_.config.http.compression.max_streams)) {
        plan_.coding = compress::Coding::identity;
        return false;
    }
    encoder_ = std::make_unique<compress::Encoder>(plan_.coding, level(), size_hint);
    return true;
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
    if (plan(reply).coding != compress::Coding::identity) {
        if (compress::compress_whole(plan_.coding, level(), body, packed_)) {
            st_.counters.compression.compressed(plan_.coding, body.size(), packed_.size());
            body = packed_;
        } else {
            log::warn("http", "cannot compress a response body (out of memory?): sent as it is");
            plan_.coding = compress::Coding::identity;
        }
    }
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
    } else if (plan(reply).coding != compress::Coding::identity &&
               (reply.body().size() > compress::slice_size || reply.holds_worker()) &&
               take_encoder(reply.body().size())) {
        ok = co_await write_compressed(&reply);
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
    if (plan(reply).coding != compress::Coding::identity && take_encoder(0))
        stream_.set_encoder(encoder_.get());
    h.content_encoding = compress::coding_name(plan_.coding);
    h.vary_accept_encoding = plan_.vary;
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

awaitable<bool> ResponseWriter::write_compressed(pool::Reply *r)
{
    pool::Reply &reply = *r;
    std::string_view body = reply.body();
    if (reply.holds_worker()) {
        const bool spilled = co_await spill_encoded(body);
        if (spilled) {
            reply.finish(); // the worker is free: what is left is the server's and the client's
            append_whole_head(reply.response, spill_size_, reply.worker_pid);
            const bool flushed = co_await ex_.transport.flush(ex_.out, true);
            if (!flushed)
                co_return false;
            const auto sent = co_await ex_.transport.send_file(spill_fd_, 0, spill_size_);
            co_return sent == Transport::Sent::all;
        }
        encoder_->reset(body.size()); // no temp file: streamed while the worker waits
    }
    Head h;
    h.status = final_status(reply.response.status, reply.worker_pid);
    ex_.status = h.status;
    h.worker = &reply.response;
    h.keep_alive = keep_alive_ && !st_.draining;
    h.content_encoding = compress::coding_name(plan_.coding);
    h.vary_accept_encoding = plan_.vary;
    stream_.set_encoder(encoder_.get());
    stream_.start(h);
    co_return co_await stream_.write(body, true);
}

awaitable<bool> ResponseWriter::spill_encoded(std::string_view body)
{
    const int fd = open_temp_file(st_.temp_dir);
    if (fd < 0)
        co_return false;
    std::string piece;
    encoded_in_ = body.size();
    bool first = true;
    do { // a slice's CPU at a time: the loop's other connections go between them
        const std::string_view slice = co_await compress::next_slice(&body, &first);
        piece.clear();
        const auto flush = body.empty() ? compress::Encoder::Flush::finish : compress::Encoder::Flush::none;
        if (!encoder_->write(slice, flush, piece) || !write_fd(fd, piece)) {
            ::close(fd);
            spill_size_ = 0;
            encoded_in_ = encoded_out_ = 0;
            co_return false;
        }
        spill_size_ += piece.size();
    } while (!body.empty());
    encoded_out_ = spill_size_;
    spill_fd_ = fd;
    co_return true;
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
    h.content_encoding = compress::coding_name(plan_.coding);
    h.vary_accept_encoding = plan_.vary;
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
    if (!write_fd(fd, body)) {
        ::close(fd);
        return false;
    }
    spill_size_ = body.size();
    spill_fd_ = fd;
    return true;
}

bool ResponseWriter::write_fd(int fd, std::string_view data)
{
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            log::warn("http", "cannot write a response body to a temp file in " + st_.temp_dir + ": " +
                                  std::strerror(n < 0 ? errno : ENOSPC) +
                                  "; sending it while the worker waits");
            return false;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

} // namespace ferry::server::detail
