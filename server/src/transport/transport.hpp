// One client connection as HTTP sees it (internal to server/): its byte stream (transport/stream.hpp), its
// place in the loop's connection list and timer wheel, and the one write path every HTTP response takes.
// Handlers and the HTTP session reach the client only through it. A connection that becomes a WebSocket or
// an event stream takes the Stream with it (take_stream): every byte a client sends or receives still goes
// through Stream, the one place a TLS stream changes.
#pragma once

#include "ferry/base/io.hpp"
#include "ferry/conf/config.hpp"
#include "timer_wheel.hpp"
#include "transport/stream.hpp"
#include "transport/wire.hpp"

#include <chrono>
#include <cstdint>
#include <list>
#include <span>
#include <string>

namespace ferry::server::detail {

class TlsContext;

// One per open connection. Its deadline lives in the loop's timer wheel: when it passes, the ticker
// cancels the stream's pending operation and sets `timed_out`.
struct Conn : WheelEntry {
    Stream *stream = nullptr;
    void (*expire)(Conn &) = nullptr; // set: the ticker calls it instead (a WebSocket's own timeouts)
    bool idle = true;                 // waiting for the first byte of a request
    bool timed_out = false;
};

// A loop's open connections and their deadlines.
struct Connections {
    std::list<Conn *> list;
    TimerWheel wheel;
    // The loop's ticker, every wheel.tick(): each connection whose deadline came is expired (its own
    // `expire`, or timed out and its waits cancelled).
    void expire_due(std::chrono::steady_clock::time_point now);
};

class Transport final : public Wire {
public:
    // Registers the connection; `write_timeout` bounds every write's wait for progress.
    Transport(Connections &conns, StreamSocket socket, conf::Duration write_timeout);
    ~Transport() override; // unregisters and closes
    Transport(const Transport &) = delete;
    Transport &operator=(const Transport &) = delete;

    const std::string &remote() const override { return remote_; } // the peer's address, "" if unknown
    // The socket's descriptor, for questions that read nothing (pool::Client: has the client left?).
    int native_handle() override { return stream_.native_handle(); }
    Conn &conn() { return conn_; }
    // Bytes handed to the socket so far (the access log's and /metrics' response sizes).
    std::uint64_t sent() const override { return sent_; }

    // Deadlines for the next read (a write arms its own).
    void arm(std::chrono::milliseconds timeout) { conns_.wheel.schedule(conn_, steady::now() + timeout); }
    void arm_at(steady::time_point t) { conns_.wheel.schedule(conn_, t); }
    void disarm() { conns_.wheel.cancel(conn_); }

    // TLS from `tls`'s current context: the handshake, within http.ssl.handshake_timeout, if fewer than
    // max_handshakes are in progress. False: the connection is to be closed (logged at debug: a scanner's
    // garbage or a client gone mid-handshake is not the server's problem).
    awaitable<bool> handshake(TlsContext &tls);
    bool secure() const { return stream_.tls() != nullptr; }
    SSL *tls() const override { return stream_.tls(); }
    Stream &stream() { return stream_; } // HTTP/2 looks at its ALPN and waits on it

    // Reads what has arrived into `buf` (at least one byte): yields {error, bytes}. Not a coroutine: no
    // frame of its own per read.
    auto read_some(std::span<char> buf) { return stream_.async_read_some(buf); }
    // Writes all of `bufs` (at most 4); the write timeout counts from the last progress, so a slow but
    // moving download is never cut. False when the client is gone or stalled. `more`: see flush().
    awaitable<bool> write(std::span<const asio::const_buffer> bufs, bool more = false) override;
    // Writes and empties `out` (and gives back its memory if a large response grew it). `more`: a body
    // follows at once (send_file), so the kernel may hold a small head to fill a segment with it (MSG_MORE).
    awaitable<bool> flush(std::string &out, bool more = false) override;
    // Sends `count` bytes of the file `fd` from `offset` with sendfile(2): no copy through user space,
    // never blocking the loop (the socket is non-blocking; a wait for room counts against the write
    // timeout from the last progress). After every `fair_share` bytes in a row it lets the loop run other
    // connections first. file_short: the file ended early (truncated while sent): the caller must close.
    awaitable<Sent> send_file(int fd, std::uint64_t offset, std::uint64_t count) override;
    // A protocol switch (WebSocket, an event stream) takes the stream over: it leaves this loop's connection
    // list and wheel here (its new owner registers it again); the Transport then holds nothing.
    Stream take_stream() override;
    // The client reset the connection (a FIN, a half-close, is not "gone").
    bool client_gone() { return stream_.peer_reset(); }
    // client_gone(), or the client closed its side (a FIN with nothing unread before it): nobody will read an
    // answer (nginx's 499). One recv(MSG_PEEK) that takes nothing.
    bool client_left() override { return stream_.peer_left(); }
    // Sends FIN. With `linger`, then reads and drops what the client still sends (at most 4 MiB, 2 s) so
    // that closing with unread input does not reset the connection and destroy the answer before the
    // client reads it (nginx's lingering close). `scratch` is any free memory to read into.
    awaitable<void> shut_down(bool linger, std::span<char> scratch);

private:
    // A write that made no progress for write_timeout: one line at info (nginx: "client timed out").
    void log_write_timeout() const;

    Connections &conns_;
    Stream stream_;
    Conn conn_;
    std::list<Conn *>::iterator registered_;
    conf::Duration write_timeout_;
    std::string remote_;
    std::uint64_t sent_ = 0;
    bool registered_flag_ = true;
};

} // namespace ferry::server::detail
