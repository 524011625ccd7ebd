// WsConn's events for PHP (ws/events.hpp builds them): queued per connection, run one at a time on a
// coroutine that exists while there are events; a worker's actions applied (docs/architecture.md,
// "WebSockets").
#include "ws/connection.hpp"

#include "ferry/base/log.hpp"
#include "handlers/failure.hpp"
#include "shared_state.hpp"
#include "ws/actions.hpp"

#include <boost/asio/co_spawn.hpp>

namespace ferry::server::detail::ws {

void WsConn::queue_event(Ev e)
{
    Busy &b = busy();
    b.event_bytes += e.payload.size();
    b.events.push_back(std::move(e));
    if (b.events.size() >= max_events || b.event_bytes > loop_.cfg.max_message_size)
        paused_ = true; // the worker is behind: stop reading until it catches up
    if (!pumping_) {
        pumping_ = true;
        asio::co_spawn(stream_.get_executor(), pump(shared_from_this()), log_exceptions{"ws events"});
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
            // The time a message in part had while we did not read is not the client's: it starts again.
            if (self->msg_since_ != steady::time_point{})
                self->msg_since_ = steady::now();
            self->arm_read();
            self->schedule();
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
    event_context(ctx, e, id_, loop_.publisher.node(), data_, sse_, remote_,
                  "http://" + loop_.st.default_host + (sse_ ? loop_.cfg.sse_path : loop_.cfg.path));
    const pool::BodyRef body = event_body(e);
    pool::Reply reply;
    co_await loop_.pool.exec(ctx, body, reply, pool::Client{}, loop_.st.loop);
    const std::string out = co_await reply.collect();
    if (reply.outcome != pool::Outcome::ok) {
        log::warn("ws", "connection " + format_id(id_) + ": the " + (e.close ? "close" : "message") +
                            " event failed: " + reply.message);
        // The failure's close code: 1013 "try again later" when no worker was free, else 1011.
        const Failure f = failure_for(reply.outcome, loop_.st.config.http.internal_error_code);
        const std::uint16_t code = f.close_code != 0 ? f.close_code : close_status::internal;
        if (!e.close)
            close(code, code == close_status::try_again_later ? "try again later" : "internal error");
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
                prepare_sse(*d, a.payload, a.binary, nullptr);
            for (const auto &t : a.targets)
                if (t == "self" || !add_target(*d, t, loop_.publisher.node(), id_))
                    send_own(*d);
            if (a.to_self)
                send_own(*d);
            if (!d->ids.empty() || !d->remote.empty())
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
                prepare_sse(*d, a.payload, a.binary, &loop_.publisher);
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
            auto d = std::make_shared<Delivery>();
            bool self = a.to_self;
            for (const auto &t : a.targets)
                if (t == "self" || !add_target(*d, t, loop_.publisher.node(), id_))
                    self = true;
            if (self)
                close(a.code, a.reason);
            if (!d->ids.empty() || !d->remote.empty()) {
                d->kind = Delivery::Kind::close;
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
