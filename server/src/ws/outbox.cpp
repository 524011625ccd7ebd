#include "ws/outbox.hpp"

#include <array>
#include <sys/uio.h>

namespace ferry::server::detail::ws {

void Outbox::unqueue(std::size_t n)
{
    s_->bytes -= n;
    budget_.give(n);
}

bool Outbox::over_limits(std::size_t size) const
{
    return pending() >= limits_.max_messages || s_->bytes + size > limits_.max_bytes;
}

void Outbox::clear()
{
    if (!s_)
        return;
    budget_.give(s_->bytes);
    s_.reset();
}

std::size_t Outbox::memory() const
{
    return s_ ? sizeof(State) + s_->queue.capacity() * sizeof(Out) : 0;
}

Outbox::Pushed Outbox::push(std::shared_ptr<const std::string> frame, bool control)
{
    Pushed r;
    const std::size_t size = frame->size();
    if (!s_)
        s_ = std::make_unique<State>();
    auto &queue = s_->queue;
    bool taken = false;
    // A control frame, or a frame for an empty queue (written at once, but for what the socket does not
    // take), is always queued; so is a message for a queue with no other whole message waiting.
    if (!control && pending() > 0 && (over_limits(size) || !(taken = budget_.try_take(size)))) {
        r.by_budget = !over_limits(size);
        r.messages = pending();
        r.bytes = s_->bytes;
        // The first waiting entry may be half written: it stays (a frame is never cut).
        const std::size_t first = s_->head + (queue[s_->head].offset > 0 ? 1 : 0);
        if (limits_.overflow == conf::Overflow::close) {
            std::size_t gone = 0;
            for (std::size_t i = first; i < queue.size(); ++i)
                gone += queue[i].frame->size() - queue[i].offset;
            unqueue(gone);
            queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(first), queue.end());
            r.result = Pushed::overflow;
            return r;
        }
        for (std::size_t i = first;
             i < queue.size() && (over_limits(size) || !(taken = budget_.try_take(size)));) {
            if (queue[i].control) {
                ++i;
                continue;
            }
            unqueue(queue[i].frame->size());
            queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(i));
            ++r.dropped;
        }
        // Nothing older left to drop and still no room. The connection's own limits drop the new message;
        // the server-wide budget does not: a queue always keeps one whole message past the frame being
        // written, so a client that reads again gets the newest (the budget is exceeded by at most that).
        if (!taken && over_limits(size)) {
            ++r.dropped;
            r.result = Pushed::dropped_new;
            if (pending() == 0)
                clear();
            return r;
        }
    }
    if (!taken)
        budget_.take(size);
    s_->bytes += size;
    queue.push_back(Out{std::move(frame), 0, control});
    return r;
}

Outbox::Written Outbox::write_to(Stream &stream)
{
    if (!s_)
        return Written::drained;
    auto &queue = s_->queue;
    auto &head = s_->head;
    while (queue.size() > head) {
        std::array<iovec, 16> iov;
        int n = 0;
        for (std::size_t i = head; i < queue.size() && n < static_cast<int>(iov.size()); ++i, ++n) {
            const Out &o = queue[i];
            iov[static_cast<std::size_t>(n)].iov_base = const_cast<char *>(o.frame->data() + o.offset);
            iov[static_cast<std::size_t>(n)].iov_len = o.frame->size() - o.offset;
        }
        const Io w = stream.write(std::span<const iovec>(iov.data(), static_cast<std::size_t>(n)));
        if (w.status == Io::wait_write)
            return Written::blocked;
        if (w.status == Io::wait_read)
            return Written::blocked_reading;
        if (w.status != Io::done)
            return Written::failed;
        auto left = w.n;
        unqueue(left);
        while (left > 0) {
            Out &o = queue[head];
            std::size_t rest = o.frame->size() - o.offset;
            if (left >= rest) {
                left -= rest;
                o.frame.reset();
                ++head;
            } else {
                o.offset += left;
                left = 0;
            }
        }
    }
    // Drained: the queue's memory goes back (an idle connection holds none).
    clear();
    return Written::drained;
}

} // namespace ferry::server::detail::ws
