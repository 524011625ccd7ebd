// WsConn's writing side: frames into its outbox (ws/outbox.hpp: the send queue, its limits and overflow
// policy), what the outbox decided logged and acted on, the one writer (docs/architecture.md, "WebSockets").
#include "ws/connection.hpp"

#include "ferry/base/log.hpp"

#include <boost/asio/bind_allocator.hpp>

#include <unordered_set>

namespace ferry::server::detail::ws {

void WsConn::send(const std::shared_ptr<const std::string> &frame)
{
    if (holding_) {
        if (held_.size() >= loop_.send_limits.max_messages && !held_.empty())
            held_.erase(held_.begin()); // as the queue's drop_oldest would
        held_.push_back(frame);
        return;
    }
    push(frame, false);
}

void WsConn::resume(const std::vector<KeptEvent> &history)
{
    holding_ = false;
    std::unordered_set<std::uint64_t> sent;
    for (const KeptEvent &e : history) {
        sent.insert(e.id);
        send(e.sse);
    }
    // What came live while the history was fetched, unless the history had it already.
    auto held = std::move(held_);
    held_.clear();
    for (auto &chunk : held)
        if (const std::uint64_t id = sse_event_id(*chunk); id == 0 || !sent.count(id))
            send(chunk);
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

void WsConn::push(std::shared_ptr<const std::string> frame, bool control)
{
    if (dead() || (phase_ != Phase::open && !control))
        return; // after our close frame (or the end), only control frames
    const Outbox::Pushed r = outbox_.push(std::move(frame), control);
    if (r.result == Outbox::Pushed::queued && r.dropped == 0) {
        if (!writing_)
            flush();
        return;
    }
    auto budget_line = [this] {
        const ByteBudget &budget = loop_.budgets.send_queue;
        return remote_ + ": connection " + format_id(id_) + ": the send queues hold " +
               std::to_string(budget.used()) + " bytes of websockets.max_send_queue_memory (" +
               std::to_string(budget.limit()) + ")";
    };
    if (r.result == Outbox::Pushed::overflow) { // overflow: close
        ++loop_.stats.overflow_closes;
        if (r.by_budget)
            loop_.budgets.report(WsBudgets::kind_send_queue, budget_line() + ": closing with 1008");
        else
            log_once("send queue full (" + std::to_string(r.messages) + " messages, " +
                     std::to_string(r.bytes) + " bytes): closing with 1008");
        const char *why = r.by_budget ? "server send memory full" : "send queue full";
        set_phase(Phase::closing);
        push(std::make_shared<const std::string>(encode_close(close_status::policy, why)), true);
        end(close_status::policy, why);
        return;
    }
    loop_.stats.dropped += r.dropped;
    if (r.by_budget)
        loop_.budgets.report(WsBudgets::kind_send_queue,
                             budget_line() + ": dropping the oldest messages of this connection");
    else if (r.dropped > 0)
        log_once("send queue full: dropping the oldest messages (the client reads too slowly)");
    if (r.result == Outbox::Pushed::queued && !writing_)
        flush();
}

void WsConn::flush()
{
    if (dead())
        return;
    switch (outbox_.write_to(stream_)) {
    case Outbox::Written::blocked:
        arm_write(Io::wait_write);
        return;
    case Outbox::Written::blocked_reading:
        arm_write(Io::wait_read);
        return;
    case Outbox::Written::failed:
        outbox_.clear(); // the client is gone: nothing queued can reach it
        lost();
        return;
    case Outbox::Written::drained:
        if (ended())
            shutdown_socket();
        return;
    }
}

void WsConn::arm_write(Io::Status wait)
{
    writing_ = true;
    stream_.async_wait(wait, asio::bind_allocator(SlabAllocator<void>(&loop_.slab),
                                                  [self = shared_from_this()](const error_code &ec) {
                                                      self->writing_ = false;
                                                      if (self->dead())
                                                          return;
                                                      if (ec && ec != asio::error::operation_aborted) {
                                                          self->lost();
                                                          return;
                                                      }
                                                      self->flush();
                                                  }));
}

} // namespace ferry::server::detail::ws
