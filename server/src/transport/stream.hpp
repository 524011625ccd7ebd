// A client's byte stream (internal to server/): the one place where a client's bytes are read and written —
// HTTP requests and answers (through Transport), WebSocket frames and SSE events (ws::WsConn, ws::Outbox).
// Non-blocking attempts that report what they wait for, and waits for exactly that (nginx's c->recv,
// c->send_chain and its read/write events). Plain TCP, or TLS after start_tls(): an SSL object on the same
// non-blocking descriptor (nginx's ngx_ssl_recv/ngx_ssl_send_chain over SSL_set_fd), where a read may have to
// wait for the socket to be writable (Io::wait_write) and a write for it to be readable; every caller waits
// on what each attempt reports.
#pragma once

#include "ferry/base/io.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <sys/types.h>
#include <sys/uio.h>
#include <utility>

using SSL = struct ssl_st;

namespace ferry::server::detail {

using tcp = asio::ip::tcp;

// Bound to its loop's io_context directly: its executor is a pointer, where tcp::socket's any_io_executor
// takes 48 bytes in the socket and again in every pending operation (idle WebSockets are the common case).
using StreamSocket = asio::basic_stream_socket<tcp, asio::io_context::executor_type>;

// What one attempt did.
struct Io {
    enum Status : std::uint8_t {
        done,       // `n` bytes moved (n > 0; a write of nothing is done with n == 0)
        wait_read,  // nothing now: wait until the stream is readable (Stream::async_wait), then try again
        wait_write, // nothing now: wait until it is writable
        eof,        // the peer closed its side (reads only)
        failed,     // the connection is broken (`error`: errno)
    };
    Status status = done;
    std::size_t n = 0;
    int error = 0;
    bool blocked() const { return status == wait_read || status == wait_write; }
};

class Stream {
public:
    // Takes a connected socket; makes it non-blocking with TCP_NODELAY.
    explicit Stream(StreamSocket socket);
    Stream(Stream &&) = default;
    Stream &operator=(Stream &&) = delete;
    ~Stream() = default; // the socket closes with it

    // One attempt each, never waiting.
    Io read(std::span<char> buf);
    // `more`: more follows at once (MSG_MORE: the kernel may hold a small head to fill a segment with it; TLS
    // holds it itself, to send it in one record with what follows: the next write or send_file must come).
    Io write(std::span<const iovec> bufs, bool more = false);
    // `count` bytes of the file `fd` from `offset` (moved on by what was sent), without a copy through user
    // space where the stream allows it.
    Io send_file(int fd, off_t &offset, std::size_t count);

    // Waits until what an attempt reported (wait_read or wait_write; anything else: readable) may go on;
    // completes with an error_code (operation_aborted after cancel()). Any Asio token.
    template <typename Token> auto async_wait(Io::Status what, Token &&token)
    {
        return socket_.async_wait(what == Io::wait_write ? tcp::socket::wait_write : tcp::socket::wait_read,
                                  std::forward<Token>(token));
    }
    // Reads at least one byte: yields {error_code, bytes} (eof as asio::error::eof). Not a coroutine: no
    // frame of its own per read (the plain stream is Asio's own speculative read, then the reactor; TLS tries
    // a read, waits for what it reports, tries again).
    auto async_read_some(std::span<char> buf)
    {
        return asio::async_initiate<decltype(nothrow), void(error_code, std::size_t)>(
            [this, buf](auto handler) {
                if (!tls_)
                    socket_.async_read_some(asio::buffer(buf.data(), buf.size()), std::move(handler));
                else
                    asio::async_compose<decltype(handler), void(error_code, std::size_t)>(TlsRead{this, buf},
                                                                                          handler, socket_);
            },
            nothrow);
    }

    // TLS from now on (takes `ssl`, a server-side SSL object; false if it is null): the handshake comes with
    // the first read or write, or handshake().
    bool start_tls(SSL *ssl);
    SSL *tls() const { return tls_ ? tls_->ssl : nullptr; }
    // One handshake attempt: done when finished (TLS only).
    Io handshake();
    // Decrypted bytes wait inside the TLS object: read() has more without the socket being readable.
    bool buffered() const;

    // Holds partial segments until uncorked (TCP_CORK, nginx's tcp_nopush): a large body in full segments.
    void set_cork(bool on);
    // Sends FIN (a TLS stream: its close_notify first). False if the socket is already unusable.
    bool shutdown_send();
    // Ends every pending wait or read with operation_aborted (a deadline passed).
    void cancel();
    void close();
    bool is_open() const { return socket_.is_open(); }

    // The peer reset the connection / or also closed its side with nothing unread (base/peer.hpp).
    bool peer_reset();
    bool peer_left();
    // The descriptor, for questions that read nothing (pool::Client: has the client left?).
    int native_handle() { return socket_.native_handle(); }
    auto get_executor() { return socket_.get_executor(); }
    // The socket, out of the stream (which is left closed): a listener handing a connection to another
    // protocol's server (the admin listener's RPC connections).
    StreamSocket take_socket() { return std::move(socket_); }
    std::string remote_address(); // "" if unknown

private:
    // A TLS stream's state, on the heap: a plain connection pays one pointer for it.
    struct Tls {
        explicit Tls(SSL *s) : ssl(s) {}
        ~Tls();
        Tls(const Tls &) = delete;
        Tls &operator=(const Tls &) = delete;
        SSL *ssl;
        std::string held; // a small write with `more`, sent in one record with what follows
    };
    // async_read_some over TLS: read() until it has bytes, the end or an error, waiting for what it reports.
    struct TlsRead {
        Stream *s;
        std::span<char> buf;
        bool first = true, ended = false;
        Io r{};
        template <typename Self> void operator()(Self &self, error_code ec = {})
        {
            if (!ended) {
                if (ec)
                    return self.complete(ec, 0);
                r = s->read(buf);
                if (r.blocked()) {
                    first = false;
                    s->async_wait(r.status, std::move(self));
                    return;
                }
                ended = true;
                if (first) // never complete inside the initiating call
                    return asio::post(s->get_executor(), std::move(self));
            }
            if (r.status == Io::done)
                self.complete(error_code{}, r.n);
            else if (r.status == Io::eof)
                self.complete(asio::error::eof, 0);
            else
                self.complete(error_code(r.error, asio::error::get_system_category()), 0);
        }
    };
    Io tls_read(std::span<char> buf);
    Io tls_write(std::span<const iovec> bufs, bool more);
    Io tls_write_held(const char *data, std::size_t len);
    Io tls_send_file(int fd, off_t &offset, std::size_t count);

    StreamSocket socket_;
    std::unique_ptr<Tls> tls_;
    bool corked_ = false;
};

} // namespace ferry::server::detail
