// A client's byte stream: plain TCP on a non-blocking descriptor, or TLS over it (OpenSSL on the descriptor).
#include "transport/stream.hpp"

#include "ferry/base/peer.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

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

// What an SSL call that moved nothing means.
Io tls_outcome(SSL *ssl, int rc)
{
    Io r;
    const int saved = errno;
    switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        r.status = Io::wait_read;
        break;
    case SSL_ERROR_WANT_WRITE:
        r.status = Io::wait_write;
        break;
    case SSL_ERROR_ZERO_RETURN: // close_notify, or an EOF (SSL_OP_IGNORE_UNEXPECTED_EOF)
        r.status = Io::eof;
        break;
    case SSL_ERROR_SYSCALL:
        r.status = saved == 0 ? Io::eof : Io::failed;
        r.error = saved;
        break;
    default: // a protocol error (garbage, a failed verification, renegotiation refused)
        r.status = Io::failed;
        r.error = EPROTO;
        break;
    }
    ERR_clear_error();
    return r;
}

// One TLS record's worth of plaintext: what a write gathers from small buffers, or reads from a file.
constexpr std::size_t record = 16 * 1024;
thread_local std::array<char, record> scratch;

} // namespace

Stream::Tls::~Tls()
{
    SSL_free(ssl);
}

bool Stream::start_tls(SSL *ssl)
{
    if (ssl == nullptr)
        return false;
    tls_ = std::make_unique<Tls>(ssl);
    SSL_set_fd(ssl, socket_.native_handle());
    SSL_set_accept_state(ssl);
    return true;
}

Io Stream::handshake()
{
    ERR_clear_error();
    const int rc = SSL_do_handshake(tls_->ssl);
    if (rc == 1)
        return Io{};
    return tls_outcome(tls_->ssl, rc);
}

bool Stream::buffered() const
{
    return tls_ && SSL_pending(tls_->ssl) > 0;
}

Io Stream::tls_read(std::span<char> buf)
{
    if (buf.empty())
        return Io{};
    ERR_clear_error();
    std::size_t n = 0;
    const int rc = SSL_read_ex(tls_->ssl, buf.data(), buf.size(), &n);
    if (rc == 1) {
        Io r;
        r.n = n;
        return r;
    }
    return tls_outcome(tls_->ssl, rc);
}

// One record at most per call: the first buffer itself when it is that large and nothing is held, else what
// is held and the buffers gathered. A retry after wait_* is called with the same buffers (or more after
// them), so it gathers the same bytes first, as OpenSSL requires. `more` (a body follows at once): a small
// write is held and goes out in one record with what follows (nginx's ngx_ssl_send_chain buffers the same
// way), where it would cost a record and a system call of its own.
Io Stream::tls_write(std::span<const iovec> bufs, bool more)
{
    std::size_t total = 0;
    for (const iovec &v : bufs)
        total += v.iov_len;
    if (more && tls_->held.size() + total <= record) {
        for (const iovec &v : bufs)
            tls_->held.append(static_cast<const char *>(v.iov_base), v.iov_len);
        Io r;
        r.n = total;
        return r;
    }
    const char *data = nullptr;
    std::size_t len = tls_->held.size();
    if (tls_->held.empty() && (bufs.size() == 1 || bufs[0].iov_len >= record)) {
        data = static_cast<const char *>(bufs[0].iov_base);
        len = bufs[0].iov_len;
    } else {
        std::copy(tls_->held.begin(), tls_->held.end(), scratch.data());
        for (const iovec &v : bufs) {
            const std::size_t take = std::min(v.iov_len, record - len);
            std::copy_n(static_cast<const char *>(v.iov_base), take, scratch.data() + len);
            len += take;
            if (len == record)
                break;
        }
        data = scratch.data();
    }
    return tls_write_held(data, len);
}

// Writes `len` bytes of `data`, whose first tls_->held.size() are what was held: done with the bytes of the
// caller's that went (what was held is no longer).
Io Stream::tls_write_held(const char *data, std::size_t len)
{
    if (len == 0)
        return Io{};
    ERR_clear_error();
    std::size_t n = 0;
    const int rc = SSL_write_ex(tls_->ssl, data, len, &n);
    if (rc != 1)
        return tls_outcome(tls_->ssl, rc);
    const std::size_t held = std::min(n, tls_->held.size()); // a record is written whole: all of it
    tls_->held.erase(0, held);
    Io r;
    r.n = n - held;
    return r;
}

// No sendfile under TLS (the kernel's TLS is not used): a record's worth read from the file (after what is
// held), then written. A retry reads the same bytes again from the same offset.
Io Stream::tls_send_file(int fd, off_t &offset, std::size_t count)
{
    const std::size_t held = tls_->held.size();
    std::copy(tls_->held.begin(), tls_->held.end(), scratch.data());
    ssize_t got;
    do {
        got = ::pread(fd, scratch.data() + held, std::min(count, record - held), offset);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
        Io r;
        r.status = Io::failed;
        r.error = errno;
        return r;
    }
    if (got == 0)
        return Io{}; // the file ended early: done with nothing moved
    Io r = tls_write_held(scratch.data(), held + static_cast<std::size_t>(got));
    if (r.status == Io::done)
        offset += static_cast<off_t>(r.n);
    return r;
}

Stream::Stream(StreamSocket socket) : socket_(std::move(socket))
{
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);
}

Io Stream::read(std::span<char> buf)
{
    if (tls_)
        return tls_read(buf);
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
    if (tls_)
        return tls_write(bufs, more);
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
    if (tls_)
        return tls_send_file(fd, offset, count);
    ssize_t n;
    do {
        n = ::sendfile(socket_.native_handle(), fd, &offset, count);
    } while (n < 0 && errno == EINTR);
    return moved(n);
}

void Stream::set_cork(bool on)
{
    if (on == corked_ || tls_)
        return;
    int v = on ? 1 : 0;
    ::setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_CORK, &v, sizeof v);
    corked_ = on;
}

bool Stream::shutdown_send()
{
    if (tls_ && SSL_is_init_finished(tls_->ssl)) {
        ERR_clear_error();
        SSL_shutdown(tls_->ssl); // close_notify, if the socket takes it now
        ERR_clear_error();
    }
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
