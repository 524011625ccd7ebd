#include "exchange.hpp"

#include "ferry/base/log.hpp"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <unistd.h>
#include <utility>

namespace ferry::pool {

namespace {
constexpr std::string_view stop_request_payload = R"({"stop":true})";
} // namespace

void WorkerExchange::prepare(Worker &w, const relay::RequestContext &ctx, const BodyRef &body,
                             RequestFrame &out) const
{
    std::string &wbuf = w.wbuf();
    wbuf.clear();
    relay::encode_request(ctx, w.codec(), wbuf);
    std::uint32_t ctx_len = static_cast<std::uint32_t>(wbuf.size());
    if (body.form) // the parsed form is the body, in this worker's codec, after the context
        relay::encode_form(*body.form, w.codec(), wbuf);
    std::size_t head_len = relay::encode_header(out.head, relay::codec_flag(w.codec()), 0,
                                                static_cast<std::uint32_t>(wbuf.size() + body.size),
                                                std::span<const std::uint32_t>(&ctx_len, 1));
    out.buffers = {asio::buffer(out.head, head_len), asio::buffer(wbuf),
                   asio::buffer(body.memory.data(), body.memory.size())};
    out.count = body.fd < 0 ? 3 : 2;
    w.channel().begin_exchange();
}

awaitable<error_code> WorkerExchange::write_file(asio::writable_pipe &pipe, int fd, std::uint64_t size)
{
    constexpr std::size_t piece = 256 * 1024;
    std::unique_ptr<char[]> buf(new char[piece]);
    for (std::uint64_t off = 0; off < size;) {
        std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(piece, size - off));
        ssize_t n = ::pread(fd, buf.get(), want, static_cast<off_t>(off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            co_return error_code(n < 0 ? errno : EIO, boost::system::system_category());
        std::array<asio::const_buffer, 1> b{asio::buffer(buf.get(), static_cast<std::size_t>(n))};
        if (error_code ec = co_await write_all_fast(pipe, b))
            co_return ec;
        off += static_cast<std::uint64_t>(n);
    }
    co_return error_code{};
}

AfterReply WorkerExchange::crashed(Worker &w, Reply &res, const std::string &why)
{
    res.outcome = Outcome::worker_crashed;
    res.message = w.tag() + ": " + why;
    log::error("pool", res.message);
    return AfterReply::kill;
}

AfterReply WorkerExchange::finish(Worker &w)
{
    // Output written after the reply is caught by the read of claim() before the next request goes out.
    if (auto end = w.channel().end_exchange(false); !end) {
        log::error("pool", w.tag() + " wrote " + end.error().message + "; retiring it");
        return AfterReply::kill;
    }
    return AfterReply::release;
}

AfterReply WorkerExchange::take_body(Worker &w, Reply &res, std::string_view body)
{
    relay::Channel &ch = w.channel();
    res.ended_ = true;
    if (body.size() <= opt_.copy_body_max) { // the common case: the worker is free before the client writes
        res.copy_.assign(body.data(), body.size());
        res.body_ = res.copy_;
        return finish(w);
    }
    if (opt_.budget && res.reservation_.grow(*opt_.budget, body.size())) {
        // Handed over without a copy (the payload keeps its address): the worker goes on with a fresh buffer.
        if (FrameBuffer taken = ch.take_frame(); taken.data) {
            res.frame_ = std::move(taken);
            res.body_ = body;
            return finish(w);
        }
        res.reservation_.reset(); // the buffer holds more than this frame
    }
    // Over the body budget: the caller reads it from the worker's buffer, the worker held until it finishes
    // (the server puts it in a temp file first). The answer is whole: exec_ttl no longer applies.
    res.body_ = body;
    w.exec().streaming_started();
    return AfterReply::hold;
}

awaitable<AfterReply> WorkerExchange::read(WorkerPtr w, Reply &res)
{
    relay::Channel &ch = w->channel();
    res.body_ = {};
    res.informational_ = false;
    res.more_ = false;
    if (res.presented_) { // the caller is done with the frame it was given
        ch.consume_frame();
        if (std::exchange(res.ping_, false)) {
            static const std::string pong = relay::encode_frame(0, relay::stream::pong, {}, {});
            if (!co_await ch.send(pong))
                co_return crashed(*w, res, "writing PONG failed");
        }
    }
    for (;;) {
        auto frame = co_await ch.next_frame();
        if (!frame) {
            if (ch.error_kind() == relay::ChannelError::premature && !res.presented_) {
                // Output of an earlier request, written before this request was read: the worker is retired
                // and the request, which never ran, goes to another worker (docs/protocol.md §2).
                log::error("pool", w->tag() + " wrote " + frame.error().message + "; retiring it");
                co_return AfterReply::kill_resend;
            }
            if (ch.error_kind() == relay::ChannelError::timed_out) {
                // The supervisor failed the exchange (exec_ttl: 504; a reset's reset_timeout: 503): the
                // client gets its answer first.
                res.outcome = w->killed_by_reset() ? Outcome::no_worker : Outcome::timed_out;
                res.message = w->tag() + ": " + frame.error().message;
                co_return AfterReply::kill_later;
            }
            co_return crashed(*w, res, frame.error().message);
        }
        const relay::FrameHeader &h = frame->header;
        std::string_view payload = frame->payload;
        if (h.flags & relay::flag::error) {
            res.outcome = Outcome::worker_error;
            res.message = std::string(payload);
            log::error("pool", w->tag() + " answered with an error: " + res.message);
            co_return finish(*w);
        }
        if (h.option_count != 1 || h.options[0] > h.payload_size) {
            res.outcome = Outcome::worker_error;
            res.message = w->tag() + ": protocol error: response frame with " +
                          std::to_string(h.option_count) + " option(s) and a " +
                          std::to_string(h.payload_size) +
                          "-byte payload (expected one option, the context length)";
            log::error("pool", res.message);
            co_return AfterReply::kill;
        }
        std::string_view ctx = payload.substr(0, h.options[0]);
        std::string_view body = payload.substr(h.options[0]);
        const bool more = (h.stream & relay::stream::more) != 0;
        if (!more && !res.presented_ && ctx == stop_request_payload && body.empty()) {
            log::debug("pool", w->tag() + " asked to stop; the request goes to another worker");
            if (auto end = ch.end_exchange(); !end) {
                log::error("pool", w->tag() + " wrote " + end.error().message + "; retiring it");
                co_return AfterReply::kill_retry;
            }
            co_return AfterReply::stop_retry;
        }
        if (!res.final_head_) {
            if (ctx.size() > opt_.max_response_head) {
                res.outcome = Outcome::bad_response;
                res.message = w->tag() + ": response head of " + std::to_string(ctx.size()) +
                              " bytes is over the " + std::to_string(opt_.max_response_head) + "-byte limit";
                log::error("pool", res.message);
                co_return more ? AfterReply::kill : finish(*w);
            }
            if (auto decoded = relay::decode_response(ctx, w->codec(), res.response); !decoded) {
                res.outcome = Outcome::worker_error;
                res.message = w->tag() + ": bad response context: " + decoded.error().message;
                log::error("pool", res.message);
                // With more to come, the rest of its stream would be read as the next reply.
                co_return more ? AfterReply::kill : finish(*w);
            }
            std::size_t lines = 0;
            for (const auto &field : res.response.headers)
                lines += field.values.size();
            if (lines > opt_.max_response_headers) {
                res.outcome = Outcome::bad_response;
                res.message = w->tag() + ": response has " + std::to_string(lines) +
                              " header lines, over the limit of " + std::to_string(opt_.max_response_headers);
                log::error("pool", res.message);
                co_return more ? AfterReply::kill : finish(*w);
            }
            res.outcome = Outcome::ok;
            res.presented_ = true;
            const int status = res.response.status;
            if (more && status >= 100 && status < 200 && status != 101 && body.empty()) {
                // 1xx (103 Early Hints), then the real response (docs/protocol.md §4).
                res.informational_ = true;
                res.ping_ = (h.stream & relay::stream::ping) != 0;
                co_return AfterReply::hold;
            }
            res.final_head_ = true;
            if (!more) // the whole response in one frame: the common case
                co_return take_body(*w, res, body);
            w->exec().streaming_started(); // the head is out: exec_ttl no longer applies (Options::exec_ttl)
        }
        // A chunk of a stream: the caller writes it, then asks for the next (PONG, if asked for, then).
        res.body_ = body;
        res.more_ = more;
        res.ended_ = !more;
        res.ping_ = (h.stream & relay::stream::ping) != 0;
        co_return AfterReply::hold;
    }
}

awaitable<AfterReply> WorkerExchange::cancel_stream(WorkerPtr w)
{
    relay::Channel &ch = w->channel();
    ch.consume_frame();
    // STOP answers a pending PING too: the worker reads exactly one frame per PING.
    static const std::string stop = relay::encode_frame(0, relay::stream::stop, {}, {});
    if (!co_await ch.send(stop))
        co_return AfterReply::kill;
    ch.arm(opt_.destroy_timeout);
    for (;;) {
        auto frame = co_await ch.next_frame();
        if (!frame) {
            ch.disarm();
            log::warn("pool", w->tag() + " did not end its stream after STOP: " + frame.error().message);
            co_return AfterReply::kill;
        }
        // No PONG after STOP: the worker takes STOP as the answer to its next PING and ends the stream.
        if (!(frame->header.stream & relay::stream::more)) {
            ch.disarm();
            co_return finish(*w);
        }
        ch.consume_frame();
    }
}

} // namespace ferry::pool
