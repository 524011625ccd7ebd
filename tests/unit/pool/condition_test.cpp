// The awaitable condition (pool/src/condition.hpp): every waiter woken at once, each with its own deadline.
#include "condition.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>
#include <vector>

using namespace ferry;
using namespace ferry::pool;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct Wait {
    std::optional<bool> notified;
    clock_type::duration took{};
};

awaitable<void> wait_on(Condition &e, clock_type::duration limit, Wait &out)
{
    auto start = clock_type::now();
    out.notified = co_await e.wait_for(limit);
    out.took = clock_type::now() - start;
}

awaitable<void> wait_on_flag(Flag &f, clock_type::duration limit, Wait &out)
{
    auto start = clock_type::now();
    out.notified = co_await f.wait_until(clock_type::now() + limit);
    out.took = clock_type::now() - start;
}

void run_for(asio::io_context &io, clock_type::duration d)
{
    io.restart();
    io.run_for(d);
}

// The wait ended: notified, or at its deadline.
void expect_woken(const Wait &w, bool notified, const char *why = "")
{
    ASSERT_TRUE(w.notified.has_value()) << why;
    EXPECT_EQ(*w.notified, notified) << why;
}

} // namespace

TEST(Condition, NotifyWakesEveryWaiterAtOnce)
{
    asio::io_context io;
    Condition e(io);
    std::vector<Wait> w(3);
    asio::co_spawn(io, wait_on(e, 10s, w[0]), asio::detached);
    asio::co_spawn(io, wait_on(e, 20s, w[1]), asio::detached);
    asio::co_spawn(io, wait_on(e, clock_type::duration::max() / 2, w[2]), asio::detached);
    run_for(io, 20ms);
    EXPECT_EQ(e.waiting(), 3u);
    e.notify();
    EXPECT_EQ(e.waiting(), 0u) << "woken waiters are unlinked at once";
    run_for(io, 20ms);
    for (auto &x : w) {
        expect_woken(x, true);
        EXPECT_LT(x.took, 1s);
    }
}

TEST(Condition, EachWaiterHasItsOwnDeadline)
{
    asio::io_context io;
    Condition e(io);
    Wait short_wait, long_wait;
    asio::co_spawn(io, wait_on(e, 30ms, short_wait), asio::detached);
    asio::co_spawn(io, wait_on(e, 10s, long_wait), asio::detached);
    run_for(io, 200ms);
    expect_woken(short_wait, false, "the deadline passed");
    EXPECT_GE(short_wait.took, 30ms);
    EXPECT_FALSE(long_wait.notified.has_value()) << "still waiting";
    EXPECT_EQ(e.waiting(), 1u);
    e.notify();
    run_for(io, 20ms);
    expect_woken(long_wait, true);
}

TEST(Condition, ANotificationIsNotKeptForLaterWaiters)
{
    asio::io_context io;
    Condition e(io);
    e.notify(); // nobody waits: nothing happens
    Wait w;
    asio::co_spawn(io, wait_on(e, 30ms, w), asio::detached);
    run_for(io, 200ms);
    expect_woken(w, false);
}

TEST(Condition, NotifiedAfterTheDeadlinePassedButBeforeTheWaiterRanCountsAsNotified)
{
    asio::io_context io;
    Condition e(io);
    Wait w;
    asio::co_spawn(io, wait_on(e, 5ms, w), asio::detached);
    io.poll(); // the waiter is suspended on its timer
    ASSERT_EQ(e.waiting(), 1u);
    ASSERT_FALSE(w.notified.has_value());
    std::this_thread::sleep_for(20ms); // the deadline passes; the loop has not run
    e.notify();
    run_for(io, 20ms);
    expect_woken(w, true);
}

TEST(Condition, AWaiterOutlivingItsConditionWakesAtItsDeadline)
{
    asio::io_context io;
    auto e = std::make_unique<Condition>(io);
    Wait w;
    asio::co_spawn(io, wait_on(*e, 30ms, w), asio::detached);
    run_for(io, 5ms);
    e.reset();
    run_for(io, 200ms);
    expect_woken(w, false);
}

TEST(Flag, StaysRaised)
{
    asio::io_context io;
    Flag f(io);
    Wait before, after;
    asio::co_spawn(io, wait_on_flag(f, 10s, before), asio::detached);
    run_for(io, 20ms);
    EXPECT_FALSE(before.notified.has_value());
    f.raise();
    EXPECT_TRUE(f.raised());
    asio::co_spawn(io, wait_on_flag(f, 10s, after), asio::detached);
    run_for(io, 20ms);
    expect_woken(before, true);
    ASSERT_TRUE(after.notified.has_value()) << "waiting on a raised flag returns at once";
    EXPECT_TRUE(*after.notified);
    EXPECT_LT(after.took, 1s);
}

TEST(Flag, DeadlineWithoutRaise)
{
    asio::io_context io;
    Flag f(io);
    Wait w;
    asio::co_spawn(io, wait_on_flag(f, 30ms, w), asio::detached);
    run_for(io, 200ms);
    expect_woken(w, false);
    EXPECT_GE(w.took, 30ms);
}
