#include "body_stream.hpp"

#include "transport/wire.hpp"

#include <array>
#include <charconv>

namespace ferry::server::detail {

BodyStream::BodyStream(Wire &transport, std::string &out, const Request &req)
    : transport_(transport), out_(out), head_request_(req.method == "HEAD"), http10_(req.http10())
{
}

awaitable<bool> BodyStream::informational(int status, const relay::ResponseContext *headers)
{
    if (http10_ || started_)
        co_return true; // no 1xx for HTTP/1.0 clients
    Head head;
    head.status = status;
    head.worker = headers;
    head.framing = Framing::none;
    append_head(out_, head);
    if (!co_await transport_.flush(out_))
        failed_ = true;
    co_return !failed_;
}

void BodyStream::start(Head head)
{
    started_ = true;
    status_ = head.status;
    head.http10 = http10_;
    if (no_body_status(head.status)) {
        head.framing = Framing::none;
    } else if (http10_) {
        head.framing = Framing::close;
        head.keep_alive = false;
    } else {
        head.framing = Framing::chunked;
    }
    chunked_ = head.framing == Framing::chunked;
    send_body_ = !head_request_ && !no_body_status(head.status);
    keep_alive_ = head.keep_alive;
    append_head(out_, head);
}

awaitable<bool> BodyStream::write(std::string_view body, bool last)
{
    bytes_in_ += body.size();
    // (GCC 12: no co_await in an unbraced if-body or a condition; it breaks the frame.)
    bool ok = false;
    if (encoder_ && send_body_) {
        ok = co_await write_encoded(body, last);
    } else {
        bytes_out_ += send_body_ ? body.size() : 0;
        ok = co_await write_piece(body, last);
    }
    co_return ok;
}

awaitable<bool> BodyStream::write_encoded(std::string_view body, bool last)
{
    bool first = true;
    do { // a slice's CPU at a time: the loop's other connections go between them
        const std::string_view slice = co_await compress::next_slice(&body, &first);
        using Flush = compress::Encoder::Flush;
        const Flush flush = !body.empty() ? Flush::none : last ? Flush::finish : Flush::sync;
        encoded_.clear();
        if (!encoder_->write(slice, flush, encoded_)) {
            failed_ = true; // out of memory in the encoder: the response is cut short
            co_return false;
        }
        bytes_out_ += encoded_.size();
        if (encoded_.empty() && out_.empty() && !(last && body.empty()))
            continue;
        const bool ok = co_await write_piece(encoded_, last && body.empty());
        if (!ok)
            co_return false;
    } while (!body.empty());
    if (encoded_.capacity() > 2 * compress::slice_size)
        std::string().swap(encoded_);
    co_return true;
}

awaitable<bool> BodyStream::write_piece(std::string_view body, bool last)
{
    std::array<asio::const_buffer, 3> bufs;
    std::size_t nb = 0;
    if (send_body_ && !body.empty()) {
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
    if (last && chunked_ && send_body_)
        trailer_.append("0\r\n").append(trailer_fields_).append("\r\n");
    if (!trailer_.empty())
        bufs[nb++] = asio::buffer(trailer_);
    bool ok = co_await transport_.write(std::span(bufs.data(), nb));
    out_.clear();
    if (!ok)
        failed_ = true;
    co_return ok;
}

} // namespace ferry::server::detail
