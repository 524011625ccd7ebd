// A client's byte stream: plain TCP on a non-blocking descriptor (stream.hpp says where TLS goes).
#include "transport/stream.hpp"

#include "ferry/base/peer.hpp"

#include <cerrno>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

namespace ferry::server::detail {

namespace {

Io from_errno()
{
    Io r;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        r.status = Io::wait_write;
    } else {
        r.status = Io::failed;
        r.error = errno;
    }
    return r;
}

// What a write or sendfile(2) returned: the bytes it moved, or what it waits for.
Io moved(ssize_t n)
{
    if (n < 0)
        return from_errno();
    Io r;
    r.n = static_cast<std::size_t>(n);
    return r;
}

} // namespace

Stream::Stream(StreamSocket socket) : socket_(std::move(socket))
{
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);
}

Io Stream::read(std::span<char> buf)
{
    ssize_t n;
    do {
        n = ::recv(socket_.native_handle(), buf.data(), buf.size(), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    Io r;
    if (n > 0) {
        r.n = static_cast<std::size_t>(n);
    } else if (n == 0) {
        r.status = buf.empty() ? Io::done : Io::eof;
    } else {
        r = from_errno();
        if (r.status == Io::wait_write)
            r.status = Io::wait_read;
    }
    return r;
}

Io Stream::write(std::span<const iovec> bufs, bool more)
{
    ssize_t w;
    do {
        if (more) {
            msghdr m{};
            m.msg_iov = const_cast<iovec *>(bufs.data());
            m.msg_iovlen = bufs.size();
            w = ::sendmsg(socket_.native_handle(), &m, MSG_MORE | MSG_NOSIGNAL);
        } else {
            w = ::writev(socket_.native_handle(), bufs.data(), static_cast<int>(bufs.size()));
        }
    } while (w < 0 && errno == EINTR);
    return moved(w);
}

Io Stream::send_file(int fd, off_t &offset, std::size_t count)
{
    ssize_t n;
    do {
        n = ::sendfile(socket_.native_handle(), fd, &offset, count);
    } while (n < 0 && errno == EINTR);
    return moved(n);
}

void Stream::set_cork(bool on)
{
    if (on == corked_)
        return;
    int v = on ? 1 : 0;
    ::setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_CORK, &v, sizeof v);
    corked_ = on;
}

bool Stream::shutdown_send()
{
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    return !ec;
}

void Stream::cancel()
{
    error_code ec;
    socket_.cancel(ec);
}

void Stream::close()
{
    error_code ec;
    socket_.close(ec);
}

bool Stream::peer_reset()
{
    return ferry::peer_reset(socket_.native_handle());
}

bool Stream::peer_left()
{
    return ferry::peer_left(socket_.native_handle());
}

std::string Stream::remote_address()
{
    error_code ec;
    if (auto ep = socket_.remote_endpoint(ec); !ec)
        return ep.address().to_string();
    return {};
}

} // namespace ferry::server::detail
