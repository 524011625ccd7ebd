// WsConn: its life (made, read, timed, ended) and what a loop's connections share. Its writing side is in
// connection_write.cpp, its events for PHP in connection_events.cpp (docs/architecture.md, "WebSockets").
#include "ws/connection.hpp"

#include "ferry/base/log.hpp"
#include "shared_state.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sys/socket.h>

namespace ferry::server::detail::ws {
namespace {

constexpr std::size_t scratch_size = 64 * 1024;
constexpr unsigned reads_per_wakeup = 4;             // then the loop's other connections get their turn
constexpr auto close_wait = std::chrono::seconds(2); // for the client's close frame, or its FIN

} // namespace

std::shared_ptr<const std::string> make_frame(Opcode op, std::string_view payload)
{
    return std::make_shared<const std::string>(encode_frame(op, payload));
}

std::shared_ptr<WsConn> WsConn::make(WsLoop &loop, Stream stream, std::uint64_t id, std::string remote,
                                     bool sse)
{
    return std::allocate_shared<WsConn>(SlabAllocator<WsConn>(&loop.slab), loop, std::move(stream), id,
                                        std::move(remote), sse);
}

void WsLoop::drain()
{
    hub.each([](WsConn &c) { c.drain(); });
}

void WsLoop::close_all()
{
    hub.each([](WsConn &c) { c.finish(); });
    if (stats.opened > 0)
        log::info("ws", "loop " + std::to_string(st.loop) + ": " + std::to_string(stats.opened) +
                            " connection(s) served, " + std::to_string(stats.dropped) +
                            " message(s) dropped by full send queues, " +
                            std::to_string(stats.overflow_closes) + " closed by a full send queue, " +
                            std::to_string(stats.protocol_errors) + " protocol error(s)");
}

WsConn::WsConn(WsLoop &loop, Stream stream, std::uint64_t id, std::string remote, bool sse)
    : loop_(loop), stream_(std::move(stream)), id_(id), remote_(std::move(remote)),
      parser_(Limits{loop.cfg.max_message_size, false, &loop.budgets.assembly}),
      outbox_(loop.budgets.send_queue, loop.send_limits), session_(loop.st.sessions.enter_anyway())
{
    sse_ = sse;
    conn_.self = this;
    conn_.stream = &stream_;
    conn_.expire = [](Conn &c) { static_cast<Timer &>(c).self->on_timeout(); };
    loop_.hub.add(this);
    registered_in_hub_ = true;
    ++loop_.stats.opened;
    last_rx_ = steady::now();
}

WsConn::~WsConn()
{
    if (registered_in_hub_)
        loop_.hub.remove(this);
    loop_.st.connections.wheel.remove(conn_);
    stream_.close();
    ++loop_.stats.closed;
}

std::size_t WsConn::memory() const
{
    std::size_t n = parser_.memory() + memberships_.capacity() * sizeof(Hub::Membership) + data_.capacity() +
                    outbox_.memory();
    if (busy_)
        n += sizeof(Busy) + busy_->events.capacity() * sizeof(Ev) + busy_->event_bytes;
    return n;
}

WsConn::Busy &WsConn::busy()
{
    if (!busy_)
        busy_ = std::make_unique<Busy>();
    return *busy_;
}

void WsConn::release_busy()
{
    // Every event is done: the queue goes (kept, even a small one pins heap pages among the short-lived
    // allocations of a burst, so that the allocator cannot give them back). The outbox does the same.
    if (busy_ && busy_->events.empty() && !pumping_)
        busy_.reset();
}

void WsConn::start(std::string_view early)
{
    if (!early.empty()) {
        // Bytes that came with the handshake: parsed from a copy (the parser unmasks in place).
        std::string copy(early);
        last_rx_ = steady::now();
        feed({copy.data(), copy.size()});
    }
    schedule();
    arm_read();
}

void WsConn::arm_read()
{
    if (reading_ || dead() || paused_)
        return;
    reading_ = true;
    if (stream_.buffered()) { // TLS: bytes already decrypted wait inside the stream, not in the socket
        asio::post(stream_.get_executor(),
                   asio::bind_allocator(SlabAllocator<void>(&loop_.slab),
                                        [self = shared_from_this()] { self->on_readable(error_code{}); }));
        return;
    }
    stream_.async_wait(read_wait_, asio::bind_allocator(SlabAllocator<void>(&loop_.slab),
                                                        [self = shared_from_this()](const error_code &ec) {
                                                            self->on_readable(ec);
                                                        }));
}

void WsConn::on_readable(const error_code &ec)
{
    reading_ = false;
    if (dead())
        return;
    if (ec) {
        if (ec != asio::error::operation_aborted) {
            lost();
            return;
        }
        if (!dead() && !writing_ && outbox_.pending() > 0)
            flush(); // the cancel stopped the writer's wait too
        arm_read();
        return;
    }
    if (loop_.scratch.empty())
        loop_.scratch.resize(scratch_size);
    read_wait_ = Io::wait_read;
    for (unsigned i = 0; i < reads_per_wakeup && !dead(); ++i) {
        const Io r = stream_.read({loop_.scratch.data(), loop_.scratch.size()});
        if (r.blocked()) {
            read_wait_ = r.status; // a TLS stream may have to write before it reads again
            break;
        }
        if (r.status != Io::done) { // EOF or a reset: nothing more can be said
            lost();
            return;
        }
        const auto n = r.n;
        if (sse_)
            continue; // an event stream's client has nothing to say: its bytes are dropped
        last_rx_ = steady::now();
        ping_out_ = false;
        if (ended())
            continue; // lingering: what the client still sends is dropped
        const bool go_on = feed({loop_.scratch.data(), n});
        if (!go_on || (n < loop_.scratch.size() && !stream_.buffered()))
            break;
    }
    if (dead())
        return;
    if (!parser_.in_message())
        parser_.release_memory(); // between messages a connection holds no parser buffer
    schedule();
    arm_read();
}

bool WsConn::feed(std::span<char> data)
{
    bool go_on = true;
    while (!data.empty() && go_on && !ended()) {
        Parsed r = parser_.parse(data);
        data = data.subspan(r.consumed);
        if (r.event == FrameEvent::need_more)
            break;
        // A message ended, or a control frame came outside a message: what follows is timed anew. A
        // control frame between the fragments of a message does not restart its time.
        if (r.event != FrameEvent::error && !parser_.in_message())
            msg_since_ = {};
        go_on = handle(r);
    }
    // websockets.message_timeout counts from the read that left a message (or frame) in part.
    if (ended() || parser_.idle())
        msg_since_ = {};
    else if (msg_since_ == steady::time_point{})
        msg_since_ = last_rx_;
    return go_on && !ended();
}

bool WsConn::handle(const Parsed &r)
{
    switch (r.event) {
    case FrameEvent::need_more:
        return true;
    case FrameEvent::message: {
        if (phase_ != Phase::open)
            return true; // after our close frame, data is dropped (RFC 6455 §1.4)
        if (loop_.cfg.relay) {
            // Relay mode: the core publishes the message to the connection's topics, PHP is not asked.
            auto d = std::make_shared<Delivery>();
            d->kind = Delivery::Kind::publish;
            for (const auto &m : memberships_)
                d->topics.push_back(m.topic->name);
            if (d->topics.empty())
                return true;
            d->exclude = id_;
            d->frame = make_frame(r.type, r.payload);
            if (sse_enabled())
                prepare_sse(*d, r.payload, r.type == Opcode::binary, &loop_.publisher);
            loop_.publisher.publish(std::move(d));
            return true;
        }
        Ev e;
        e.binary = r.type == Opcode::binary;
        e.payload.assign(r.payload);
        queue_event(std::move(e));
        return true;
    }
    case FrameEvent::ping:
        if (phase_ == Phase::open)
            push(make_frame(Opcode::pong, r.payload), true);
        return true;
    case FrameEvent::pong:
        return true;
    case FrameEvent::close: {
        peer_done_ = true;
        std::uint16_t code = r.close_code;
        std::string reason(r.close_reason);
        if (phase_ == Phase::open) {
            // Echo the code (RFC 6455 §5.5.1); an empty close frame gets an empty one.
            set_phase(Phase::closing);
            push(std::make_shared<const std::string>(encode_close(code)), true);
        }
        end(code, reason);
        return false;
    }
    case FrameEvent::error:
        if (parser_.refused_by_budget()) {
            const auto &b = loop_.budgets.assembly;
            loop_.budgets.report(WsBudgets::kind_assembly,
                                 remote_ + ": connection " + format_id(id_) +
                                     ": a message received in part (" + std::to_string(parser_.memory()) +
                                     " bytes held) cannot grow: " + std::to_string(b.used()) +
                                     " of websockets.max_assembly_memory (" + std::to_string(b.limit()) +
                                     " bytes) in use; closing with " + std::to_string(r.error_code));
            abort_with(r.error_code, r.error);
        } else {
            fail(r.error_code, r.error);
        }
        return false;
    }
    return false;
}

void WsConn::fail(std::uint16_t code, std::string_view why)
{
    ++loop_.stats.protocol_errors;
    log::info("ws", remote_ + ": connection " + format_id(id_) + ": " + std::string(why) + ", closing with " +
                        std::to_string(code));
    abort_with(code, why);
}

void WsConn::abort_with(std::uint16_t code, std::string_view why)
{
    if (phase_ == Phase::open) {
        set_phase(Phase::closing);
        push(std::make_shared<const std::string>(encode_close(code, why)), true);
    }
    end(code, why);
}

void WsConn::close(std::uint16_t code, std::string_view reason)
{
    if (phase_ != Phase::open)
        return;
    if (sse_) {
        // The stream's last chunk; the client's EventSource reconnects (with Last-Event-ID) unless told not
        // to by a 204 at its next open.
        set_phase(Phase::closing);
        push(std::make_shared<const std::string>("0\r\n\r\n"), true);
        end(code, reason);
        return;
    }
    set_phase(Phase::closing);
    close_deadline_ = steady::now() + close_wait;
    push(std::make_shared<const std::string>(encode_close(code, reason)), true);
    schedule();
}

void WsConn::end(std::uint16_t code, std::string_view reason)
{
    if (ended())
        return;
    set_phase(Phase::ended);
    close_deadline_ = steady::now() + close_wait;
    parser_.discard(); // a message received in part is given up: its memory goes back at once
    msg_since_ = {};
    if (registered_in_hub_) {
        // Not now: end() may run inside the Hub's delivery loop over a topic's members. Until then
        // push() takes no message (ended()).
        asio::post(stream_.get_executor(), [self = shared_from_this()] {
            if (self->registered_in_hub_) {
                self->loop_.hub.remove(self.get());
                self->registered_in_hub_ = false;
            }
        });
    }
    Ev e;
    e.close = true;
    e.code = code;
    e.payload.assign(reason);
    queue_event(std::move(e));
    if (outbox_.pending() == 0)
        shutdown_socket();
    else
        schedule();
}

void WsConn::shutdown_socket()
{
    if (dead())
        return;
    if (!peer_done_ && phase_ != Phase::lingering) {
        // Our FIN first, then whatever the client still sends is read and dropped until its FIN or
        // close_wait (nginx's lingering close): closing with unread input would reset the connection and
        // could destroy our close frame before the client reads it.
        set_phase(Phase::lingering);
        if (stream_.shutdown_send()) {
            schedule();
            arm_read();
            return;
        }
    }
    finish();
}

void WsConn::lost()
{
    peer_done_ = true;
    if (!ended())
        end(close_status::abnormal, {});
    finish();
}

void WsConn::finish()
{
    if (dead())
        return;
    set_phase(Phase::dead);
    loop_.st.connections.wheel.cancel(conn_);
    stream_.close();
    outbox_.clear();
    parser_.discard();
}

void WsConn::on_timeout()
{
    const auto now = steady::now();
    if (phase_ != Phase::open) {
        if (now >= close_deadline_) {
            peer_done_ = true; // no more waiting
            if (!ended())
                end(close_status::abnormal, "the client did not answer the close frame");
            finish();
        } else {
            schedule();
        }
        return;
    }
    const auto &cfg = loop_.cfg;
    if (sse_) {
        // An event stream's keep-alive: a comment line (it also finds a client that is gone, by its write
        // failing); the client sends nothing, so there is no idle timeout.
        static const auto heartbeat = std::make_shared<const std::string>("3\r\n:\n\n\r\n");
        if (now >= last_rx_ + cfg.sse_heartbeat) {
            last_rx_ = now;
            push(heartbeat, true);
        }
        schedule();
        return;
    }
    if (cfg.message_timeout.count() > 0 && msg_since_ != steady::time_point{} && !paused_ &&
        now >= msg_since_ + cfg.message_timeout) {
        // Pings and pongs do not help: only the end of the message would.
        loop_.budgets.report(
            WsBudgets::kind_message_timeout,
            remote_ + ": connection " + format_id(id_) + ": a message begun " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::milliseconds>(now - msg_since_).count()) +
                " ms ago is not complete (websockets.message_timeout: " +
                std::to_string(cfg.message_timeout.count()) + " ms); closing with 1008");
        abort_with(close_status::policy, "message timeout");
        return;
    }
    if (cfg.ping_interval.count() > 0 && !ping_out_ && now >= last_rx_ + cfg.ping_interval) {
        ping_out_ = true;
        push(make_frame(Opcode::ping, {}), true);
    }
    if (cfg.idle_timeout.count() > 0 && now >= last_rx_ + cfg.idle_timeout) {
        log::info("ws", remote_ + ": connection " + format_id(id_) + ": nothing received for " +
                            std::to_string(cfg.idle_timeout.count()) + " ms, closing");
        close(close_status::going_away, "idle timeout");
        return;
    }
    schedule();
}

void WsConn::schedule()
{
    if (dead())
        return;
    steady::time_point at;
    const auto &cfg = loop_.cfg;
    if (phase_ != Phase::open) {
        at = close_deadline_;
    } else if (sse_) {
        at = cfg.sse_heartbeat.count() > 0 ? last_rx_ + cfg.sse_heartbeat : steady::time_point::max();
    } else {
        at = steady::time_point::max();
        if (cfg.ping_interval.count() > 0 && !ping_out_)
            at = last_rx_ + cfg.ping_interval;
        if (cfg.idle_timeout.count() > 0)
            at = std::min(at, last_rx_ + cfg.idle_timeout);
        if (cfg.message_timeout.count() > 0 && msg_since_ != steady::time_point{} && !paused_)
            at = std::min(at, msg_since_ + cfg.message_timeout);
    }
    if (at == steady::time_point::max())
        loop_.st.connections.wheel.cancel(conn_);
    else
        loop_.st.connections.wheel.schedule(conn_, at);
}

void WsConn::drain()
{
    close(close_status::going_away, "server shutting down");
}

void WsConn::log_once(std::string_view what)
{
    if (overflow_logged_)
        return;
    overflow_logged_ = true;
    log::warn("ws", remote_ + ": connection " + format_id(id_) + ": " + std::string(what));
}

} // namespace ferry::server::detail::ws
