#include "ws/connection.hpp"

#include "ferry/relay/log.hpp"
#include "shared_state.hpp"
#include "ws/actions.hpp"

#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sys/socket.h>
#include <sys/uio.h>

namespace ferry::server::detail::ws {
namespace {

constexpr std::size_t scratch_size = 64 * 1024;
constexpr unsigned reads_per_wakeup = 4;             // then the loop's other connections get their turn
constexpr auto close_wait = std::chrono::seconds(2); // for the client's close frame, or its FIN
// Events for PHP beyond these stop the reading of this connection until the worker catches up.
constexpr std::size_t max_events = 64;

} // namespace

std::string format_id(std::uint64_t id)
{
    return std::to_string(id >> 40) + "." + std::to_string(id & ((std::uint64_t(1) << 40) - 1));
}

std::uint64_t parse_id(std::string_view s)
{
    auto dot = s.find('.');
    if (dot == std::string_view::npos)
        return 0;
    std::uint64_t loop = 0, n = 0;
    auto [p1, e1] = std::from_chars(s.data(), s.data() + dot, loop);
    auto [p2, e2] = std::from_chars(s.data() + dot + 1, s.data() + s.size(), n);
    if (e1 != std::errc() || e2 != std::errc() || p1 != s.data() + dot || p2 != s.data() + s.size() ||
        loop == 0 || loop >= (1u << 20) || n >= (std::uint64_t(1) << 40))
        return 0;
    return (loop << 40) | n;
}

std::shared_ptr<const std::string> make_frame(Opcode op, std::string_view payload)
{
    return std::make_shared<const std::string>(encode_frame(op, payload));
}

std::shared_ptr<WsConn> WsConn::make(WsLoop &loop, WsSocket socket, std::uint64_t id, std::string remote,
                                     bool sse)
{
    return std::allocate_shared<WsConn>(SlabAllocator<WsConn>(&loop.slab), loop, std::move(socket), id,
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

WsConn::WsConn(WsLoop &loop, WsSocket socket, std::uint64_t id, std::string remote, bool sse)
    : loop_(loop), socket_(std::move(socket)), id_(id), remote_(std::move(remote)),
      parser_(Limits{loop.cfg.max_message_size, false})
{
    sse_ = sse;
    conn_.self = this;
    conn_.expire = [](Conn &c) { static_cast<Timer &>(c).self->on_timeout(); };
    ++loop_.st.sessions;
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
    error_code ec;
    socket_.close(ec);
    ++loop_.stats.closed;
    loop_.st.session_ended();
}

std::size_t WsConn::memory() const
{
    std::size_t n = parser_.memory() + memberships_.capacity() * sizeof(Hub::Membership) + data_.capacity();
    if (busy_)
        n += sizeof(Busy) + busy_->queue.capacity() * sizeof(Out) + busy_->events.capacity() * sizeof(Ev) +
             busy_->event_bytes;
    return n;
}

WsConn::Busy &WsConn::busy()
{
    if (!busy_)
        busy_ = std::make_unique<Busy>();
    return *busy_;
}

std::size_t WsConn::pending_out() const
{
    return busy_ ? busy_->queue.size() - busy_->head : 0;
}

void WsConn::release_busy()
{
    // Everything in flight is done: the queues go (kept, even small ones pin heap pages among the
    // short-lived allocations of a burst, so that the allocator cannot give them back).
    if (busy_ && busy_->queue.size() == busy_->head && busy_->events.empty() && !writing_ && !pumping_)
        busy_.reset();
}

void WsConn::drop_queue()
{
    if (!busy_)
        return;
    std::vector<Out>().swap(busy_->queue);
    busy_->head = busy_->queued_bytes = 0;
    release_busy();
}

void WsConn::start(std::string_view early)
{
    if (!early.empty()) {
        // Bytes that came with the handshake: parsed from a copy (the parser unmasks in place).
        std::string copy(early);
        std::span<char> data(copy.data(), copy.size());
        while (!data.empty() && !dead_) {
            Parsed r = parser_.parse(data);
            data = data.subspan(r.consumed);
            if (r.event == Event::need_more || !handle(r))
                break;
        }
    }
    schedule();
    arm_read();
}

void WsConn::arm_read()
{
    if (reading_ || dead_ || paused_)
        return;
    reading_ = true;
    socket_.async_wait(
        tcp::socket::wait_read,
        asio::bind_allocator(SlabAllocator<void>(&loop_.slab),
                             [self = shared_from_this()](const error_code &ec) { self->on_readable(ec); }));
}

void WsConn::on_readable(const error_code &ec)
{
    reading_ = false;
    if (dead_)
        return;
    if (ec) {
        if (ec != asio::error::operation_aborted) {
            lingering_ = true;
            if (!ended_)
                end(close_status::abnormal, {});
            finish();
            return;
        }
        if (!dead_ && !writing_ && pending_out() > 0)
            flush(); // the cancel stopped the writer's wait too
        arm_read();
        return;
    }
    if (loop_.scratch.empty())
        loop_.scratch.resize(scratch_size);
    const int fd = socket_.native_handle();
    for (unsigned i = 0; i < reads_per_wakeup && !dead_; ++i) {
        ssize_t n = ::recv(fd, loop_.scratch.data(), loop_.scratch.size(), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) { // EOF or a reset: nothing more can be said
            lingering_ = true;
            if (!ended_)
                end(close_status::abnormal, {});
            finish();
            return;
        }
        if (sse_)
            continue; // an event stream's client has nothing to say: its bytes are dropped
        last_rx_ = steady::now();
        ping_out_ = false;
        if (ended_)
            continue; // lingering: what the client still sends is dropped
        std::span<char> data(loop_.scratch.data(), static_cast<std::size_t>(n));
        bool go_on = true;
        while (!data.empty() && go_on) {
            Parsed r = parser_.parse(data);
            data = data.subspan(r.consumed);
            if (r.event == Event::need_more)
                break;
            go_on = handle(r);
        }
        if (!go_on || static_cast<std::size_t>(n) < loop_.scratch.size())
            break;
    }
    if (dead_)
        return;
    if (!parser_.in_message())
        parser_.release_memory(); // between messages a connection holds no parser buffer
    schedule();
    arm_read();
}

bool WsConn::handle(const Parsed &r)
{
    switch (r.event) {
    case Event::need_more:
        return true;
    case Event::message: {
        if (close_sent_)
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
                prepare_sse(*d, r.payload, r.type == Opcode::binary);
            loop_.publisher.publish(std::move(d));
            return true;
        }
        Ev e;
        e.binary = r.type == Opcode::binary;
        e.payload.assign(r.payload);
        queue_event(std::move(e));
        return true;
    }
    case Event::ping:
        if (!close_sent_)
            push(Out{make_frame(Opcode::pong, r.payload), 0, true});
        return true;
    case Event::pong:
        return true;
    case Event::close: {
        close_received_ = true;
        std::uint16_t code = r.close_code;
        std::string reason(r.close_reason);
        if (!close_sent_) {
            // Echo the code (RFC 6455 §5.5.1); an empty close frame gets an empty one.
            close_sent_ = true;
            push(Out{std::make_shared<const std::string>(encode_close(code)), 0, true});
        }
        end(code, reason);
        return false;
    }
    case Event::error:
        fail(r.error_code, r.error);
        return false;
    }
    return false;
}

void WsConn::fail(std::uint16_t code, std::string_view why)
{
    ++loop_.stats.protocol_errors;
    log::info("ws", remote_ + ": connection " + format_id(id_) + ": " + std::string(why) + ", closing with " +
                        std::to_string(code));
    if (!close_sent_) {
        close_sent_ = true;
        push(Out{std::make_shared<const std::string>(encode_close(code, why)), 0, true});
    }
    end(code, why);
}

void WsConn::close(std::uint16_t code, std::string_view reason)
{
    if (dead_ || close_sent_ || ended_)
        return;
    if (sse_) {
        // The stream's last chunk; the client's EventSource reconnects (with Last-Event-ID) unless told not
        // to by a 204 at its next open.
        close_sent_ = true;
        push(Out{std::make_shared<const std::string>("0\r\n\r\n"), 0, true});
        end(code, reason);
        return;
    }
    close_sent_ = true;
    close_deadline_ = steady::now() + close_wait;
    push(Out{std::make_shared<const std::string>(encode_close(code, reason)), 0, true});
    schedule();
}

void WsConn::end(std::uint16_t code, std::string_view reason)
{
    if (ended_)
        return;
    ended_ = true;
    close_deadline_ = steady::now() + close_wait;
    if (registered_in_hub_) {
        // Not now: end() may run inside the Hub's delivery loop over a topic's members. Until then
        // push() takes no message (ended_).
        asio::post(socket_.get_executor(), [self = shared_from_this()] {
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
    if (pending_out() == 0)
        shutdown_socket();
    else
        schedule();
}

void WsConn::shutdown_socket()
{
    if (dead_)
        return;
    if (!close_received_ && !lingering_) {
        // Our FIN first, then whatever the client still sends is read and dropped until its FIN or
        // close_wait (nginx's lingering close): closing with unread input would reset the connection and
        // could destroy our close frame before the client reads it.
        lingering_ = true;
        error_code ec;
        socket_.shutdown(tcp::socket::shutdown_send, ec);
        if (!ec) {
            schedule();
            arm_read();
            return;
        }
    }
    finish();
}

void WsConn::finish()
{
    if (dead_)
        return;
    dead_ = true;
    loop_.st.connections.wheel.cancel(conn_);
    error_code ec;
    socket_.close(ec);
    drop_queue();
    parser_.release_memory();
}

void WsConn::on_timeout()
{
    const auto now = steady::now();
    if (ended_ || close_sent_) {
        if (now >= close_deadline_) {
            lingering_ = true; // no more waiting
            if (!ended_)
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
            push(Out{heartbeat, 0, true});
        }
        schedule();
        return;
    }
    if (cfg.ping_interval.count() > 0 && !ping_out_ && now >= last_rx_ + cfg.ping_interval) {
        ping_out_ = true;
        push(Out{make_frame(Opcode::ping, {}), 0, true});
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
    if (dead_)
        return;
    steady::time_point at;
    const auto &cfg = loop_.cfg;
    if (ended_ || close_sent_) {
        at = close_deadline_;
    } else if (sse_) {
        at = cfg.sse_heartbeat.count() > 0 ? last_rx_ + cfg.sse_heartbeat : steady::time_point::max();
    } else {
        at = steady::time_point::max();
        if (cfg.ping_interval.count() > 0 && !ping_out_)
            at = last_rx_ + cfg.ping_interval;
        if (cfg.idle_timeout.count() > 0)
            at = std::min(at, last_rx_ + cfg.idle_timeout);
    }
    if (at == steady::time_point::max())
        loop_.st.connections.wheel.cancel(conn_);
    else
        loop_.st.connections.wheel.schedule(conn_, at);
}

void WsConn::send(const std::shared_ptr<const std::string> &frame)
{
    push(Out{frame, 0, false});
}

void WsConn::send_own(const Delivery &d)
{
    if (const auto &bytes = sse_ ? d.sse : d.frame)
        send(bytes);
}

bool WsConn::sse_enabled() const
{
    return !loop_.cfg.sse_path.empty();
}

void WsConn::push(Out o)
{
    if (dead_ || (ended_ && !o.control))
        return;
    if (close_sent_ && !o.control)
        return;
    const auto &cfg = loop_.cfg;
    const std::size_t size = o.frame->size();
    Busy &b = busy();
    auto &queue_ = b.queue;
    auto &head_ = b.head;
    auto &queued_bytes_ = b.queued_bytes;
    auto pending = [&b] { return b.queue.size() - b.head; };
    if (!o.control && pending() > 0 &&
        (pending() >= cfg.max_queue_messages || queued_bytes_ + size > cfg.max_queue_bytes)) {
        // The first waiting entry may be half written: it stays (a frame is never cut).
        std::size_t first = head_ + (queue_[head_].offset > 0 ? 1 : 0);
        if (cfg.overflow == "close") {
            ++loop_.stats.overflow_closes;
            log_once("send queue full (" + std::to_string(pending()) + " messages, " +
                     std::to_string(queued_bytes_) + " bytes): closing with 1008");
            for (std::size_t i = first; i < queue_.size(); ++i)
                queued_bytes_ -= queue_[i].frame->size();
            queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(first), queue_.end());
            close_sent_ = true;
            push(Out{
                std::make_shared<const std::string>(encode_close(close_status::policy, "send queue full")), 0,
                true});
            end(close_status::policy, "send queue full");
            return;
        }
        std::size_t dropped = 0;
        for (std::size_t i = first; i < queue_.size() && (pending() >= cfg.max_queue_messages ||
                                                          queued_bytes_ + size > cfg.max_queue_bytes);) {
            if (queue_[i].control) {
                ++i;
                continue;
            }
            queued_bytes_ -= queue_[i].frame->size();
            queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
            ++dropped;
        }
        loop_.stats.dropped += dropped;
        if (dropped > 0)
            log_once("send queue full: dropping the oldest messages (the client reads too slowly)");
    }
    queued_bytes_ += size - o.offset;
    queue_.push_back(std::move(o));
    if (!writing_)
        flush();
}

void WsConn::flush()
{
    if (dead_)
        return;
    if (!busy_)
        return;
    const int fd = socket_.native_handle();
    auto &queue_ = busy_->queue;
    auto &head_ = busy_->head;
    auto &queued_bytes_ = busy_->queued_bytes;
    while (queue_.size() > head_) {
        std::array<iovec, 16> iov;
        int n = 0;
        for (std::size_t i = head_; i < queue_.size() && n < static_cast<int>(iov.size()); ++i, ++n) {
            const Out &o = queue_[i];
            iov[static_cast<std::size_t>(n)].iov_base = const_cast<char *>(o.frame->data() + o.offset);
            iov[static_cast<std::size_t>(n)].iov_len = o.frame->size() - o.offset;
        }
        ssize_t w = ::writev(fd, iov.data(), n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            arm_write();
            return;
        }
        if (w < 0) {
            // The client is gone: nothing queued can reach it.
            lingering_ = true;
            drop_queue();
            if (!ended_)
                end(close_status::abnormal, {});
            finish();
            return;
        }
        auto left = static_cast<std::size_t>(w);
        queued_bytes_ -= left;
        while (left > 0) {
            Out &o = queue_[head_];
            std::size_t rest = o.frame->size() - o.offset;
            if (left >= rest) {
                left -= rest;
                o.frame.reset();
                ++head_;
            } else {
                o.offset += left;
                left = 0;
            }
        }
    }
    // Drained: the queue's memory goes back (an idle connection holds none).
    std::vector<Out>().swap(queue_);
    head_ = 0;
    queued_bytes_ = 0;
    release_busy();
    if (ended_)
        shutdown_socket();
}

void WsConn::arm_write()
{
    writing_ = true;
    socket_.async_wait(tcp::socket::wait_write,
                       asio::bind_allocator(SlabAllocator<void>(&loop_.slab),
                                            [self = shared_from_this()](const error_code &ec) {
                                                self->writing_ = false;
                                                if (self->dead_)
                                                    return;
                                                if (ec && ec != asio::error::operation_aborted) {
                                                    self->lingering_ = true;
                                                    if (!self->ended_)
                                                        self->end(close_status::abnormal, {});
                                                    self->finish();
                                                    return;
                                                }
                                                self->flush();
                                            }));
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

void WsConn::queue_event(Ev e)
{
    Busy &b = busy();
    b.event_bytes += e.payload.size();
    b.events.push_back(std::move(e));
    if (b.events.size() >= max_events || b.event_bytes > loop_.cfg.max_message_size)
        paused_ = true; // the worker is behind: stop reading until it catches up
    if (!pumping_) {
        pumping_ = true;
        asio::co_spawn(socket_.get_executor(), pump(shared_from_this()), log_exceptions{"ws events"});
    }
}

awaitable<void> WsConn::pump(std::shared_ptr<WsConn> self)
{
    while (self->busy_ && !self->busy_->events.empty()) {
        Busy &b = *self->busy_;
        Ev e = std::move(b.events.front());
        b.events.erase(b.events.begin());
        b.event_bytes -= e.payload.size();
        if (self->paused_ && b.events.size() < max_events / 2 &&
            b.event_bytes <= self->loop_.cfg.max_message_size / 2) {
            self->paused_ = false;
            self->arm_read();
        }
        co_await self->run_event(e);
    }
    if (self->busy_)
        std::vector<Ev>().swap(self->busy_->events);
    self->pumping_ = false;
    self->release_busy();
    co_return;
}

awaitable<void> WsConn::run_event(Ev &e)
{
    relay::RequestContext ctx;
    ctx.remote_addr = remote_;
    ctx.protocol = "HTTP/1.1";
    ctx.method = "POST";
    ctx.uri = "http://" + loop_.st.default_host + (sse_ ? loop_.cfg.sse_path : loop_.cfg.path);
    ctx.attributes.reserve(5);
    ctx.attributes.emplace_back("ferry.ws.event", e.close ? "close" : "message");
    ctx.attributes.emplace_back("ferry.ws.id", format_id(id_));
    ctx.attributes.emplace_back("ferry.ws.data", data_);
    if (sse_)
        ctx.attributes.emplace_back("ferry.ws.transport", "sse");
    if (e.close) {
        ctx.attributes.emplace_back("ferry.ws.code", std::to_string(e.code));
        ctx.attributes.emplace_back("ferry.ws.reason", e.payload);
    } else {
        ctx.attributes.emplace_back("ferry.ws.type", e.binary ? "binary" : "text");
    }
    pool::BodyRef body;
    if (!e.close) {
        body.memory = e.payload;
        body.size = e.payload.size();
    }
    std::string out;
    pool::Reply reply = co_await loop_.pool.exec(ctx, body, out, nullptr, loop_.st.loop);
    if (reply.outcome != pool::Outcome::ok) {
        log::warn("ws", "connection " + format_id(id_) + ": the " + (e.close ? "close" : "message") +
                            " event failed: " + reply.message);
        if (!e.close)
            close(close_status::internal, "internal error");
        co_return;
    }
    auto actions = parse_actions(out);
    if (!actions) {
        log::error("ws", "connection " + format_id(id_) + ": worker " + std::to_string(reply.worker_pid) +
                             " answered the " + (e.close ? "close" : "message") +
                             " event with bad actions: " + actions.error().message);
        if (!e.close)
            close(close_status::internal, "internal error");
        co_return;
    }
    apply(*actions);
    co_return;
}

void WsConn::apply(const std::vector<Action> &actions)
{
    for (const Action &a : actions) {
        const Opcode op = a.binary ? Opcode::binary : Opcode::text;
        switch (a.op) {
        case Op::send: {
            auto d = std::make_shared<Delivery>();
            d->kind = Delivery::Kind::send;
            d->frame = make_frame(op, a.payload);
            if (sse_enabled())
                prepare_sse(*d, a.payload, a.binary, false);
            for (const auto &t : a.targets) {
                std::uint64_t target = t == "self" ? id_ : parse_id(t);
                if (target == id_)
                    send_own(*d);
                else if (target != 0)
                    d->ids.push_back(target);
            }
            if (a.to_self)
                send_own(*d);
            if (!d->ids.empty())
                loop_.publisher.publish(std::move(d));
            break;
        }
        case Op::publish: {
            auto d = std::make_shared<Delivery>();
            d->kind = Delivery::Kind::publish;
            d->topics = a.targets;
            d->exclude = a.exclude_self ? id_ : 0;
            d->frame = make_frame(op, a.payload);
            if (sse_enabled())
                prepare_sse(*d, a.payload, a.binary);
            loop_.publisher.publish(std::move(d));
            break;
        }
        case Op::join:
            if (registered_in_hub_)
                for (const auto &t : a.targets)
                    loop_.hub.join(this, t);
            break;
        case Op::leave:
            if (registered_in_hub_)
                for (const auto &t : a.targets)
                    loop_.hub.leave(this, t);
            break;
        case Op::close: {
            std::vector<std::uint64_t> others;
            for (const auto &t : a.targets) {
                std::uint64_t target = t == "self" ? id_ : parse_id(t);
                if (target == id_)
                    close(a.code, a.reason);
                else if (target != 0)
                    others.push_back(target);
            }
            if (a.to_self)
                close(a.code, a.reason);
            if (!others.empty()) {
                auto d = std::make_shared<Delivery>();
                d->kind = Delivery::Kind::close;
                d->ids = std::move(others);
                d->code = a.code;
                d->reason = a.reason;
                loop_.publisher.publish(std::move(d));
            }
            break;
        }
        case Op::data:
            data_ = a.value;
            break;
        }
    }
}

} // namespace ferry::server::detail::ws
