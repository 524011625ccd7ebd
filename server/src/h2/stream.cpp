#include "h2/stream.hpp"

#include "ferry/base/log.hpp"
#include "h2/connection.hpp"
#include "shared_state.hpp"

#include <nghttp2/nghttp2.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <algorithm>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

namespace ferry::server::detail::h2 {

H2Stream::H2Stream(Connection &c, std::int32_t id) : c_(c), id_(id), room_(c.state().io) {}

H2Stream::~H2Stream()
{
    if (budgeted > 0)
        c_.state().head_budget->give(budgeted);
}

const std::string &H2Stream::remote() const
{
    return c_.transport().remote();
}
SSL *H2Stream::tls() const
{
    return c_.transport().tls();
}
int H2Stream::native_handle()
{
    return c_.transport().native_handle();
}

void H2Stream::on_head(Framer::Head &head)
{
    if (!c_.submit_head(*this, head))
        open = false;
}

void H2Stream::on_data(std::string_view bytes)
{
    if (taken_bytes_ == pending_.size()) { // all taken: start over at the front
        pending_.clear();
        taken_bytes_ = 0;
    }
    pending_.append(bytes);
    if (deferred_) {
        deferred_ = false;
        c_.resume(*this);
    }
}

void H2Stream::on_trailers(std::vector<std::pair<std::string, std::string>> &fields)
{
    trailers_ = std::move(fields);
}

void H2Stream::on_end()
{
    ended_ = true;
    if (deferred_) {
        deferred_ = false;
        c_.resume(*this);
    }
}

bool H2Stream::emit(std::string_view bytes)
{
    if (!open)
        return false;
    framer_.set_head_request(request.method == "HEAD");
    if (!framer_.feed(bytes, *this)) {
        log::error("http2", "stream " + std::to_string(id_) + " (" + request.method + " " + request.target +
                                "): the handler's response cannot be sent as HTTP/2: " + framer_.error());
        c_.reset(*this, NGHTTP2_INTERNAL_ERROR);
        return false;
    }
    sent_ += bytes.size();
    c_.wake();
    return open;
}

void H2Stream::answer(std::string_view bytes)
{
    emit(bytes);
}

void H2Stream::wake()
{
    if (waiting_)
        room_.cancel();
}

awaitable<bool> H2Stream::drain(std::size_t limit)
{
    const auto timeout = c_.state().config.http.write_timeout;
    std::uint64_t last = taken_total_;
    auto deadline = steady::now() + timeout;
    while (open && held() + file_left_ > limit) {
        room_.expires_at(deadline);
        waiting_ = true;
        auto [ec] = co_await room_.async_wait(nothrow);
        waiting_ = false;
        if (taken_total_ != last) {
            last = taken_total_;
            deadline = steady::now() + timeout;
            continue;
        }
        if (!ec && open) { // the deadline passed with nothing taken: the window stayed shut
            log::info("http2", remote() + ": stream " + std::to_string(id_) + ": no progress writing for " +
                                   std::to_string(timeout.count()) +
                                   " ms (http.timeouts.write, the client's flow-control window stayed "
                                   "closed): resetting it");
            c_.reset(*this, NGHTTP2_CANCEL);
        }
    }
    co_return open;
}

awaitable<bool> H2Stream::write(std::span<const asio::const_buffer> bufs, bool)
{
    for (const auto &b : bufs)
        if (b.size() > 0 && !emit(std::string_view(static_cast<const char *>(b.data()), b.size())))
            co_return false;
    co_return co_await drain(high_water);
}

awaitable<bool> H2Stream::flush(std::string &bytes, bool)
{
    if (bytes.empty())
        co_return open;
    const bool ok = emit(bytes);
    bytes.clear();
    if (bytes.capacity() > 64 * 1024)
        std::string().swap(bytes);
    co_return ok &&co_await drain(high_water);
}

awaitable<Wire::Sent> H2Stream::send_file(int fd, std::uint64_t offset, std::uint64_t count)
{
    if (!open)
        co_return Sent::client_gone;
    if (framer_.can_skip(count)) {
        // Read by read_data() straight into nghttp2's frames as the window lets them go: no copy held here,
        // nothing read ahead of the client.
        file_fd_ = fd;
        file_offset_ = offset;
        file_left_ = count;
        file_short_ = false;
        if (deferred_) {
            deferred_ = false;
            c_.resume(*this);
        }
        c_.wake();
        const bool ok = co_await drain(0);
        file_fd_ = -1;
        file_left_ = 0;
        if (file_short_)
            co_return Sent::file_short;
        co_return ok ? Sent::all : Sent::client_gone;
    }
    // A chunked body (not ours today): read in pieces, held bytes under high_water + one piece.
    std::string piece;
    while (count > 0) {
        piece.resize(static_cast<std::size_t>(std::min<std::uint64_t>(count, 16 * 1024)));
        const ssize_t n = ::pread(fd, piece.data(), piece.size(), static_cast<off_t>(offset));
        if (n <= 0)
            co_return Sent::file_short;
        offset += static_cast<std::uint64_t>(n);
        count -= static_cast<std::uint64_t>(n);
        if (!emit(std::string_view(piece.data(), static_cast<std::size_t>(n))) || !co_await drain(high_water))
            co_return Sent::client_gone;
    }
    co_return Sent::all;
}

void H2Stream::finish()
{
    if (taken_)
        return;
    if (!out.empty()) {
        emit(out);
        out.clear();
    }
    if (!open || framer_.done())
        return;
    if (framer_.until_end()) { // a body without a length ends with its writer
        on_end();
        c_.wake();
        return;
    }
    // Cut short (the handler failed mid-answer, or answered nothing: its client left): HTTP/1.1 would close
    // the connection; here the stream alone ends.
    c_.reset(*this, framer_.started() ? NGHTTP2_INTERNAL_ERROR : NGHTTP2_CANCEL);
}

void H2Stream::closed(std::uint32_t)
{
    open = false;
    wake();
    if (pumped_)
        pumped_->cancel();
}

long H2Stream::read_data(std::size_t len, std::uint32_t *flags)
{
    // How much the next DATA frame carries; send_frame() copies it (held bytes first, then the file) straight
    // into the connection's write buffer (NGHTTP2_DATA_FLAG_NO_COPY: no copy through nghttp2's own).
    const std::uint64_t avail = held() + file_left_;
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(len, avail));
    const std::size_t from_file = n - std::min(n, held());
    if (from_file > 0) {
        file_left_ -= from_file;
        framer_.skip(from_file, *this); // may end the response (on_end)
    }
    taken_total_ += n;
    if (n > 0)
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (avail == n && file_left_ == 0 && ended_) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (!trailers_.empty()) { // the stream ends with them, not with this DATA frame
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            c_.submit_trailers(*this, trailers_);
        }
    } else if (n == 0) {
        deferred_ = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n > 0)
        wake();
    return static_cast<long>(n);
}

int H2Stream::send_frame(std::string &wbuf, const std::uint8_t *framehd, std::size_t length)
{
    const std::size_t mark = wbuf.size();
    wbuf.append(reinterpret_cast<const char *>(framehd), 9);
    const std::size_t from_held = std::min(length, held());
    wbuf.append(pending_, taken_bytes_, from_held);
    taken_bytes_ += from_held;
    std::size_t from_file = length - from_held;
    if (from_file > 0) {
        std::size_t at = wbuf.size();
        wbuf.resize(at + from_file);
        while (from_file > 0) {
            const ssize_t r =
                ::pread(file_fd_, wbuf.data() + at, from_file, static_cast<off_t>(file_offset_));
            if (r <=
                0) { // the file was cut while sent: the stream is reset (its client must not take it whole)
                wbuf.resize(mark);
                file_short_ = true;
                file_left_ = 0;
                wake();
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            }
            file_offset_ += static_cast<std::uint64_t>(r);
            at += static_cast<std::size_t>(r);
            from_file -= static_cast<std::size_t>(r);
        }
    }
    // A batch is gathered: nghttp2 returns from mem_send, the writer writes it, then asks for more.
    return wbuf.size() >= batch ? NGHTTP2_ERR_PAUSE : 0;
}

// An event stream (or another protocol switch) takes a byte stream: one end of a socket pair, whose other
// end this pumps into the stream's DATA (the handler writes HTTP/1.1 there as to a client). The stream's
// close closes the pair, which the taker reads as the client leaving.
detail::Stream H2Stream::take_stream()
{
    int sv[2];
    StreamSocket outer(c_.state().io.get_executor());
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        log::error("http2", "socketpair: " + std::string(std::strerror(errno)));
        c_.reset(*this, NGHTTP2_INTERNAL_ERROR);
        return detail::Stream(std::move(outer)); // closed: its owner sees the client gone
    }
    error_code ec;
    outer.assign(tcp::v4(), sv[0], ec);
    StreamSocket inner(c_.state().io.get_executor());
    inner.assign(tcp::v4(), sv[1], ec);
    taken_ = true;
    c_.track(*this);
    asio::co_spawn(c_.state().io, pump(std::move(inner)), asio::detached);
    return detail::Stream(std::move(outer));
}

awaitable<void> H2Stream::pump(StreamSocket inner)
{
    auto hold = c_.hold();
    inner.non_blocking(true);
    pumped_ = &inner;
    std::string &buf = c_.state().scratch; // read, then handed on before anything else runs
    while (open) {
        auto [ec] = co_await inner.async_wait(tcp::socket::wait_read, nothrow); // closed() cancels it
        if (ec || !open)
            break;
        const std::size_t n = inner.read_some(asio::buffer(buf.data(), buf.size()), ec);
        if (ec == asio::error::would_block)
            continue;
        if (ec || n == 0) { // the taker is done: its response ends here
            taken_ = false;
            finish();
            break;
        }
        if (!emit(std::string_view(buf.data(), n)) || !co_await drain(high_water))
            break;
    }
    pumped_ = nullptr;
    inner.close();
    c_.release(*this);
}

} // namespace ferry::server::detail::h2
