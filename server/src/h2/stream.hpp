// One HTTP/2 stream (internal to server/): its request as the handlers know it (Request), and the Wire their
// answer goes to — HTTP/1.1 bytes read back by a Framer into HEADERS and DATA, held until nghttp2 takes them
// as the peer's flow-control window allows. The window is the back-pressure: a handler's write waits while
// more than `high_water` bytes are held, so a slow stream never holds more than that.
#pragma once

#include "ferry/server/http_parser.hpp"
#include "h2/framer.hpp"
#include "handlers/handler.hpp"
#include "transport/wire.hpp"

#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace ferry::server::detail::h2 {

class Connection;

class H2Stream final : public Wire, private Framer::Sink {
public:
    static constexpr std::size_t high_water = 64 * 1024;

    H2Stream(Connection &c, std::int32_t id);
    ~H2Stream() override;
    std::int32_t id() const { return id_; }

    Request request;
    std::string out; // the Exchange's pending output
    // While the request comes (h2/connection.cpp's callbacks).
    std::size_t header_bytes = 0;
    std::uint64_t budgeted = 0; // of header_bytes, held from http.limits.max_head_memory until it goes
    int refused = 0;            // a status answered without a handler (431, 413, ...); later input ignored
    bool reset_sent = false;    // refused: a RST_STREAM(NO_ERROR) ended the client's upload
    int handler_index = -1;     // the Router's choice at the head (-1: none: 404)
    std::unique_ptr<Handler::Connection> handler; // its state for this stream (kept for the next one)
    BodySink *sink = nullptr;
    std::uint64_t body_bytes = 0;
    unsigned users = 0;    // its handler and an event stream's pump, while they run
    bool open = true;      // writes go on (false once reset or closed)
    bool finished = false; // nghttp2 closed it (its close callback came): it may be forgotten
    bool ready = false;    // the request is complete and waits to be dispatched
    std::chrono::steady_clock::time_point started;

    // Wire
    const std::string &remote() const override;
    SSL *tls() const override;
    int native_handle() override;
    std::uint64_t sent() const override { return sent_; }
    awaitable<bool> write(std::span<const asio::const_buffer> bufs, bool more = false) override;
    awaitable<bool> flush(std::string &out, bool more = false) override;
    awaitable<Sent> send_file(int fd, std::uint64_t offset, std::uint64_t count) override;
    detail::Stream take_stream() override;
    bool client_left() override { return !open; }

    // An answer without a handler (a refused request): HTTP/1.1 bytes from append_error and friends.
    void answer(std::string_view bytes);
    // After the handler: what is left in `out`, then the response's end; a response cut short is reset.
    void finish();
    bool answered() const { return framer_.done(); }
    bool taken() const { return taken_; } // an event stream's pump runs it
    // nghttp2 closed the stream (its end, or a reset: `code`).
    void closed(std::uint32_t code);
    // nghttp2's data source: how many of the held bytes (then the file's) the next DATA frame of at most
    // `len` carries; NGHTTP2_ERR_DEFERRED when none is held yet. send_frame() then appends that frame to
    // `out`, the connection's write buffer: its 9-byte header, then the bytes (0, or a reset of the stream).
    long read_data(std::size_t len, std::uint32_t *flags);
    int send_frame(std::string &wbuf, const std::uint8_t *framehd, std::size_t length);
    static constexpr std::size_t batch = 64 * 1024; // send_frame pauses nghttp2 past it (the writer's batch)
    bool all_taken() const { return ended_ && held() == 0 && file_left_ == 0; }

private:
    void on_head(Framer::Head &head) override;
    void on_data(std::string_view bytes) override;
    void on_trailers(std::vector<std::pair<std::string, std::string>> &fields) override;
    void on_end() override;
    bool emit(std::string_view bytes); // through the framer; false: reset (a bug logged)
    // Until no more than `limit` bytes are held (a file being sent counts whole): false if the stream closed
    // or made no progress for http.timeouts.write (then reset).
    awaitable<bool> drain(std::size_t limit);
    awaitable<void> pump(StreamSocket inner); // an event stream's bytes from its socket pair to DATA
    void wake();

    Connection &c_;
    std::int32_t id_;
    Framer framer_;
    std::string pending_; // DATA bytes not yet taken by nghttp2, from taken_bytes_ on
    std::size_t taken_bytes_ = 0;
    bool ended_ = false, deferred_ = false, taken_ = false;
    std::uint64_t sent_ = 0;
    std::uint64_t taken_total_ = 0; // bytes nghttp2 has taken (a waiting write's progress)
    // A file being sent (send_file): read_data() reads it into nghttp2's frames once the held bytes are out.
    int file_fd_ = -1;
    std::uint64_t file_offset_ = 0, file_left_ = 0;
    bool file_short_ = false;
    std::size_t held() const { return pending_.size() - taken_bytes_; }
    std::vector<std::pair<std::string, std::string>> trailers_; // sent after the last DATA frame
    asio::steady_timer room_; // a waiting write sleeps on it; taking bytes or a close cancels it
    bool waiting_ = false;
    StreamSocket *pumped_ = nullptr; // the pump's end of the socket pair, while it runs
};

} // namespace ferry::server::detail::h2
