// The awaitable condition variable (condition.hpp): waiters with their own deadlines, woken together.
#include "condition.hpp"

#include <algorithm>

namespace ferry::pool {

// Lives on the waiting coroutine's frame; unlinks itself however the frame ends (resumed or destroyed).
struct Condition::Waiter {
    Waiter(asio::io_context &io, Condition *e) : timer(io), event(e) { event->waiters_.push_back(this); }
    ~Waiter()
    {
        if (event) {
            auto &list = event->waiters_;
            list.erase(std::find(list.begin(), list.end(), this));
        }
    }
    Waiter(const Waiter &) = delete;
    Waiter &operator=(const Waiter &) = delete;

    asio::steady_timer timer;
    Condition *event;
    bool notified = false;
};

Condition::~Condition()
{
    for (Waiter *w : waiters_)
        w->event = nullptr; // detached: it wakes at its deadline, or goes with its frame
}

void Condition::notify()
{
    // The timer's handler may already be queued (deadline passed): `notified` still says why it woke.
    for (Waiter *w : waiters_) {
        w->notified = true;
        w->event = nullptr; // unlinked here: woken once, and nothing left to unlink when its frame ends
        w->timer.cancel();
    }
    waiters_.clear();
}

awaitable<bool> Condition::wait_until(clock::time_point deadline)
{
    Waiter w(io_, this);
    w.timer.expires_at(deadline);
    co_await w.timer.async_wait(nothrow);
    co_return w.notified;
}

awaitable<bool> Flag::wait_until(clock::time_point deadline) const
{
    if (raised_)
        co_return true;
    co_return co_await event_.wait_until(deadline); // only raise() notifies
}

} // namespace ferry::pool
