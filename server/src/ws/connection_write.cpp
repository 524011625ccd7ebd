// WsConn's writing side: the send queue, its limits and overflow policy, the one writer
// (docs/architecture.md, "WebSockets").
#include "ws/connection.hpp"

#include "ferry/base/log.hpp"

#include <boost/asio/bind_allocator.hpp>

#include <array>
#include <cerrno>
#include <sys/uio.h>

namespace ferry::server::detail::ws {

void WsConn::drop_queue()
{
    if (!busy_)
        return;
    std::vector<Out>().swap(busy_->queue);
    unqueue(busy_->queued_bytes);
    busy_->head = 0;
    release_busy();
}

void WsConn::unqueue(std::size_t n)
{
    busy_->queued_bytes -= n;
    loop_.budgets.send_queue.give(n);
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
    if (dead() || (phase_ != Phase::open && !o.control))
        return; // after our close frame (or the end), only control frames
    const auto &cfg = loop_.cfg;
    ByteBudget &budget = loop_.budgets.send_queue;
    const std::size_t size = o.frame->size() - o.offset;
    Busy &b = busy();
    auto &queue_ = b.queue;
    auto &head_ = b.head;
    auto pending = [&b] { return b.queue.size() - b.head; };
    // This connection's limits, then the server-wide budget (websockets.max_send_queue_memory): past
    // either, the overflow policy applies to this connection. A control frame, or a frame for an empty
    // queue (written at once, but for what the socket does not take), is always queued.
    auto over_queue = [&] {
        return pending() >= cfg.max_queue_messages || b.queued_bytes + size > cfg.max_queue_bytes;
    };
    bool taken = false;
    if (!o.control && pending() > 0 && (over_queue() || !(taken = budget.try_take(size)))) {
        const bool by_budget = !over_queue();
        auto budget_line = [&] {
            return remote_ + ": connection " + format_id(id_) + ": the send queues hold " +
                   std::to_string(budget.used()) + " bytes of websockets.max_send_queue_memory (" +
                   std::to_string(budget.limit()) + ")";
        };
        // The first waiting entry may be half written: it stays (a frame is never cut).
        std::size_t first = head_ + (queue_[head_].offset > 0 ? 1 : 0);
        if (cfg.overflow == conf::Overflow::close) {
            ++loop_.stats.overflow_closes;
            if (by_budget)
                loop_.budgets.report(WsBudgets::kind_send_queue, budget_line() + ": closing with 1008");
            else
                log_once("send queue full (" + std::to_string(pending()) + " messages, " +
                         std::to_string(b.queued_bytes) + " bytes): closing with 1008");
            std::size_t gone = 0;
            for (std::size_t i = first; i < queue_.size(); ++i)
                gone += queue_[i].frame->size() - queue_[i].offset;
            unqueue(gone);
            queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(first), queue_.end());
            const char *why = by_budget ? "server send memory full" : "send queue full";
            set_phase(Phase::closing);
            push(Out{std::make_shared<const std::string>(encode_close(close_status::policy, why)), 0, true});
            end(close_status::policy, why);
            return;
        }
        std::size_t dropped = 0;
        for (std::size_t i = first;
             i < queue_.size() && (over_queue() || !(taken = budget.try_take(size)));) {
            if (queue_[i].control) {
                ++i;
                continue;
            }
            unqueue(queue_[i].frame->size());
            queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
            ++dropped;
        }
        // Nothing older left to drop and still no room: the new message is the one dropped.
        const bool drop_new = !taken && (over_queue() || !(taken = budget.try_take(size)));
        dropped += drop_new ? 1 : 0;
        loop_.stats.dropped += dropped;
        if (by_budget)
            loop_.budgets.report(WsBudgets::kind_send_queue,
                                 budget_line() + ": dropping the oldest messages of this connection");
        else if (dropped > 0)
            log_once("send queue full: dropping the oldest messages (the client reads too slowly)");
        if (drop_new) {
            release_busy();
            return;
        }
    }
    if (!taken)
        budget.take(size);
    b.queued_bytes += size;
    queue_.push_back(std::move(o));
    if (!writing_)
        flush();
}

void WsConn::flush()
{
    if (dead())
        return;
    if (!busy_)
        return;
    const int fd = socket_.native_handle();
    auto &queue_ = busy_->queue;
    auto &head_ = busy_->head;
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
            drop_queue();
            lost();
            return;
        }
        auto left = static_cast<std::size_t>(w);
        unqueue(left);
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
    unqueue(busy_->queued_bytes); // none left: written
    release_busy();
    if (ended())
        shutdown_socket();
}

void WsConn::arm_write()
{
    writing_ = true;
    socket_.async_wait(tcp::socket::wait_write,
                       asio::bind_allocator(SlabAllocator<void>(&loop_.slab),
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
