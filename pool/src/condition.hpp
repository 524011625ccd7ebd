// Waiting on events instead of polling (internal to pool/): a Condition (an awaitable condition variable)
// wakes every coroutine waiting on it, each with its own deadline; a Flag is a Condition that stays raised (a
// stop that began).
#pragma once

#include "ferry/base/io.hpp"

#include <chrono>
#include <cstddef>
#include <vector>

namespace ferry::pool {

// notify() wakes every waiter present at that moment; it keeps no state for later waiters (it is not a
// latch). On one thread nothing happens between a check and the wait that follows it, so the usual shape
//     while (!condition()) if (!co_await event.wait_until(deadline)) break;
// misses no notification. Each waiter arms a timer of its own on its own frame: nothing is shared or
// re-armed between waiters.
class Condition {
public:
    using clock = std::chrono::steady_clock;

    explicit Condition(asio::io_context &io) : io_(io) {}
    ~Condition(); // waiters still suspended are detached: they wake at their deadline, not notified
    Condition(const Condition &) = delete;
    Condition &operator=(const Condition &) = delete;

    void notify();
    // True when notified, false at the deadline. time_point::max() waits for a notification only.
    awaitable<bool> wait_until(clock::time_point deadline);
    awaitable<bool> wait_for(clock::duration limit) { return wait_until(clock::now() + limit); }
    std::size_t waiting() const { return waiters_.size(); }

private:
    struct Waiter;
    asio::io_context &io_;
    std::vector<Waiter *> waiters_;
};

// A one-way flag with waiters: once raised it stays raised, and waiting on a raised flag returns at once.
class Flag {
public:
    using clock = Condition::clock;

    explicit Flag(asio::io_context &io) : event_(io) {}

    bool raised() const { return raised_; }
    void raise()
    {
        raised_ = true;
        event_.notify();
    }
    // True when raised (now or before the deadline), false at the deadline.
    awaitable<bool> wait_until(clock::time_point deadline) const;

private:
    bool raised_ = false;
    mutable Condition event_; // waiting does not change the flag
};

} // namespace ferry::pool
