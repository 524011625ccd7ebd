#include "timer_wheel.hpp"

namespace ferry::server::detail {

TimerWheel::TimerWheel(std::chrono::milliseconds tick, std::size_t slots, steady::time_point origin)
    : tick_(tick), origin_(origin), slots_(slots)
{
    for (auto &h : slots_)
        h.prev = h.next = &h;
}

std::uint64_t TimerWheel::tick_of(steady::time_point t) const
{
    if (t <= origin_)
        return 0;
    auto since = std::chrono::duration_cast<std::chrono::milliseconds>(t - origin_);
    return static_cast<std::uint64_t>(since / tick_);
}

void TimerWheel::link(WheelEntry &e, steady::time_point deadline)
{
    // The slot of the tick at or after the deadline; never one already visited.
    std::uint64_t t = tick_of(deadline);
    if (t < next_tick_)
        t = next_tick_;
    WheelEntry &head = slots_[t % slots_.size()];
    e.due_tick = t;
    e.prev = head.prev;
    e.next = &head;
    head.prev->next = &e;
    head.prev = &e;
    if (!e.linked)
        ++size_;
    e.linked = true;
}

void TimerWheel::remove(WheelEntry &e)
{
    if (!e.linked)
        return;
    e.prev->next = e.next;
    e.next->prev = e.prev;
    e.prev = e.next = nullptr;
    e.linked = false;
    --size_;
}

void TimerWheel::schedule(WheelEntry &e, steady::time_point deadline)
{
    e.deadline = deadline;
    if (deadline == steady::time_point::max())
        return;
    std::uint64_t t = std::max(tick_of(deadline), next_tick_);
    if (e.linked && e.due_tick <= t)
        return; // its slot comes first: it moves on then
    remove(e);
    link(e, deadline);
}

} // namespace ferry::server::detail
