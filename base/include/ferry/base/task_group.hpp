// What an owner started and must see end (Seastar's gate): each task holds the group while it runs (a Hold,
// released when the task's frame goes), the owner's stop closes the group — no new task enters — and joins
// it: waits until the last holder has left, or a deadline. A stop is cancel (the owner ends what its tasks
// wait on: it closes their connections) and join. One event loop's: touched by that loop's thread only.
#pragma once

#include "ferry/base/io.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <cassert>
#include <chrono>
#include <cstddef>
#include <utility>

namespace ferry {

class TaskGroup {
public:
    class Hold {
    public:
        Hold() = default;
        Hold(Hold &&o) noexcept : group_(std::exchange(o.group_, nullptr)) {}
        Hold &operator=(Hold &&o) noexcept
        {
            if (this != &o) {
                release();
                group_ = std::exchange(o.group_, nullptr);
            }
            return *this;
        }
        ~Hold() { release(); }
        explicit operator bool() const { return group_ != nullptr; }
        // Leaves the group now (the task's own end comes later, but nothing it does matters to the owner).
        void release()
        {
            if (auto *g = std::exchange(group_, nullptr))
                g->leave();
        }

    private:
        friend class TaskGroup;
        explicit Hold(TaskGroup *g) : group_(g) {}
        TaskGroup *group_ = nullptr;
    };

    TaskGroup() = default;
    TaskGroup(const TaskGroup &) = delete;
    TaskGroup &operator=(const TaskGroup &) = delete;
    ~TaskGroup() { assert(count_ == 0 && "a task outlived its group"); }

    // A task begins: its hold, or an empty one once the group is closed (the task is not to start).
    Hold enter()
    {
        if (closed_)
            return Hold();
        ++count_;
        return Hold(this);
    }
    // A task that begins whatever the group's state (a connection already accepted when the stop began: it
    // runs to its end, and the join waits for it).
    Hold enter_anyway()
    {
        ++count_;
        return Hold(this);
    }
    std::size_t size() const { return count_; }
    bool closed() const { return closed_; }
    void close() { closed_ = true; }

    // Until every holder has left, or `deadline`: true when none is left. One joiner at a time.
    awaitable<bool> join(std::chrono::steady_clock::time_point deadline)
    {
        if (count_ == 0)
            co_return true;
        assert(!waiter_);
        asio::steady_timer t(co_await asio::this_coro::executor, deadline);
        waiter_ = &t;
        co_await t.async_wait(nothrow);
        waiter_ = nullptr;
        co_return count_ == 0;
    }

private:
    void leave()
    {
        if (--count_ == 0 && waiter_)
            waiter_->cancel();
    }
    std::size_t count_ = 0;
    bool closed_ = false;
    asio::steady_timer *waiter_ = nullptr;
};

} // namespace ferry
