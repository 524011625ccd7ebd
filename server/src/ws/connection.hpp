// One WebSocket connection after its handshake (internal to server/; docs/architecture.md, "WebSockets").
// Lean by design, because idle connections are the common case: no coroutine frame while idle (the read
// wait is a plain completion handler), reads go into the loop's shared scratch buffer (a partial frame's
// bytes are the only per-connection buffer), and the send queue (ws/outbox.hpp) holds shared frames,
// allocated only while something waits to be written. Events for PHP (message, close) run one at a time per
// connection, in order, on a coroutine that exists only while there are events.
#pragma once

#include "ferry/base/task_group.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"
#include "transport/transport.hpp"
#include "ws/budget.hpp"
#include "ws/events.hpp"
#include "ws/frame.hpp"
#include "ws/hub.hpp"
#include "ws/outbox.hpp"
#include "ws/slab.hpp"

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry::server::detail {
struct SharedState;
}

namespace ferry::server::detail::ws {

struct Action;

struct WsStats {
    std::uint64_t opened = 0, closed = 0;
    std::uint64_t dropped = 0;         // messages dropped by a full send queue (overflow: drop_oldest)
    std::uint64_t overflow_closes = 0; // connections closed with 1008 by a full send queue (overflow: close)
    std::uint64_t protocol_errors = 0;
};

// What one loop's WebSocket connections share.
struct WsLoop {
    WsLoop(SharedState &s, const conf::WebsocketsConfig &c, pool::Pool &p, Publisher &pub, WsBudgets &b)
        : st(s), cfg(c), pool(p), publisher(pub),
          budgets(b), send_limits{static_cast<std::size_t>(c.max_queue_messages),
                                  static_cast<std::size_t>(c.max_queue_bytes), c.overflow}
    {
    }
    SharedState &st;
    const conf::WebsocketsConfig &cfg;
    pool::Pool &pool; // the websockets workers
    Publisher &publisher;
    WsBudgets &budgets;               // server-wide: messages received in part, send queues
    const Outbox::Limits send_limits; // every connection's send queue (cfg's, read once)
    Hub hub;
    Slab slab;                 // the connections and their pending waits (slab.hpp says why)
    std::vector<char> scratch; // every connection of the loop reads into it (64 KiB, made at the first read)
    std::uint32_t next_id = 0;
    WsStats stats;

    std::uint64_t make_id(unsigned loop) { return (static_cast<std::uint64_t>(loop + 1) << 40) | ++next_id; }
    // A stop: every connection gets its close frame (1001); then close_all() ends what is left.
    void drain();
    void close_all();
};

std::shared_ptr<const std::string> make_frame(Opcode op, std::string_view payload);

class WsConn : public std::enable_shared_from_this<WsConn> {
public:
    // `sse`: a server-sent events stream (its response head already written): it gets the SSE form of
    // text messages, heartbeats instead of pings, and reads nothing.
    // `stream`: what the HTTP side hands over (Transport::take_stream).
    WsConn(WsLoop &loop, Stream stream, std::uint64_t id, std::string remote, bool sse = false);
    // The way connections are made: in the loop's slab.
    static std::shared_ptr<WsConn> make(WsLoop &loop, Stream stream, std::uint64_t id, std::string remote,
                                        bool sse = false);
    bool sse() const { return sse_; }
    // Queues what was encoded earlier (the history of its topics, at an SSE resume).
    void send_history(const std::vector<KeptEvent> &events)
    {
        for (const auto &e : events)
            send(e.sse);
    }
    // An SSE resume through a broker: what comes while the shared history is fetched waits (at most the send
    // queue's count of messages), then resume() sends the history and what waited that it did not have.
    void hold() { holding_ = true; }
    void resume(const std::vector<KeptEvent> &history);
    ~WsConn();
    WsConn(const WsConn &) = delete;
    WsConn &operator=(const WsConn &) = delete;

    // Starts reading; `early` are bytes the client sent after its handshake (already read by the HTTP side).
    void start(std::string_view early);

    std::uint64_t id() const { return id_; }
    // Queues a frame (the send queue's limits and overflow policy apply).
    void send(const std::shared_ptr<const std::string> &frame);
    // Starts the close handshake: a close frame after what is queued, then the connection ends when the
    // client answers (or after 2 s).
    void close(std::uint16_t code, std::string_view reason);
    // Applies a worker's actions for an event of this connection.
    void apply(const std::vector<Action> &actions);
    void set_data(std::string d) { data_ = std::move(d); }
    bool open() const { return phase_ == Phase::open; }

    std::vector<Hub::Membership> &memberships() { return memberships_; }
    std::uint64_t stamp = 0; // the Hub's last publish to reach it
    void drain();            // the server stops: close with 1001
    void finish();           // the socket is closed; the object goes when the last handler lets it go
    // Bytes held by this connection beyond the object itself (parser, queues, data).
    std::size_t memory() const;

private:
    // Events for PHP beyond these stop the reading of this connection until the worker catches up.
    static constexpr std::size_t max_events = 64;

    using Ev = PhpEvent; // ws/events.hpp
    // What exists only while events for PHP wait or run.
    struct Busy {
        std::vector<Ev> events; // for PHP, in order
        std::size_t event_bytes = 0;
    };
    Busy &busy();
    void release_busy();

    void arm_read();
    void on_readable(const error_code &ec);
    void on_timeout();
    bool feed(std::span<char> data); // parses what was read; false: stop reading
    bool handle(const Parsed &r);    // false: stop reading
    void queue_event(Ev e);
    void fail(std::uint16_t code, std::string_view why);
    void abort_with(std::uint16_t code, std::string_view why); // our close frame (if not sent), then end()
    // Queues a frame (control: close, ping, pong, a heartbeat) and writes what the socket takes; the outbox's
    // overflow is logged and acted on here.
    void push(std::shared_ptr<const std::string> frame, bool control);
    void flush();
    void arm_write(Io::Status wait);
    void schedule();
    void end(std::uint16_t code, std::string_view reason); // the connection is over: tell PHP, close
    void shutdown_socket(); // after the last write: FIN, then a short lingering read
    static awaitable<void> pump(std::shared_ptr<WsConn> self);
    awaitable<void> run_event(Ev &e);
    void log_once(std::string_view what);
    void send_own(const Delivery &d); // this connection's form of a delivery (a frame, or an SSE event)
    bool sse_enabled() const;         // SSE forms are made for every text message

    // Its deadline in the loop's timer wheel (ping, idle, close handshake): the ticker calls on_timeout().
    struct Timer : Conn {
        WsConn *self = nullptr;
    };

    WsLoop &loop_;
    Stream stream_;
    Timer conn_;
    std::uint64_t id_;
    std::string remote_, data_;
    FrameParser parser_;
    std::vector<Hub::Membership> memberships_;
    Outbox outbox_;
    TaskGroup::Hold session_; // one of the loop's sessions (a stop joins them)
    std::unique_ptr<Busy> busy_;
    steady::time_point last_rx_, close_deadline_;
    steady::time_point msg_since_{}; // the read that left a message (or frame) in part; {}: none is
    // Where the connection is in its life; it only moves forward (set_phase).
    enum class Phase : std::uint8_t {
        open,    // messages both ways
        closing, // our close frame is queued: no more messages are taken; the client has close_wait to answer
        ended,   // over for PHP (its close event is queued): what is queued still goes out (our close frame),
                 // then our FIN
        lingering, // our FIN is sent: what the client still sends is read and dropped until its FIN or
                   // close_wait
        dead,      // the socket is closed; the object goes when the last handler lets it go
    };
    Phase phase_ = Phase::open;
    Io::Status read_wait_ = Io::wait_read; // what the last read waits for (a TLS stream's read may write)
    bool ended() const { return phase_ >= Phase::ended; }
    bool dead() const { return phase_ == Phase::dead; }
    void set_phase(Phase p)
    {
        if (p > phase_)
            phase_ = p;
    }
    // The client's connection failed (a read or write error, EOF, no answer to our close frame): PHP gets
    // its close event (1006) unless it had one, and the socket is closed at once.
    void lost();

    bool reading_ = false, writing_ = false, pumping_ = false, paused_ = false, ping_out_ = false;
    // The client is done sending (its close frame came, or its connection failed): no lingering read.
    bool peer_done_ = false;
    bool overflow_logged_ = false, registered_in_hub_ = false, sse_ = false;
    bool holding_ = false;                                 // hold(): sends wait in held_
    std::vector<std::shared_ptr<const std::string>> held_; // oldest first
};

} // namespace ferry::server::detail::ws
