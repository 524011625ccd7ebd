// The task group (ferry/base/task_group.hpp): each task holds it while it runs, a closed group lets no new
// task in, and join waits for the last holder or its deadline.
#include "ferry/base/task_group.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

using namespace std::chrono_literals;
using ferry::TaskGroup;
namespace asio = boost::asio;

namespace {

// A task that holds the group until `t` fires (or is cancelled: the owner ending what it waits on).
asio::awaitable<void> task(TaskGroup::Hold hold, asio::steady_timer &t)
{
    co_await t.async_wait(ferry::nothrow);
    (void)hold;
}

} // namespace

TEST(TaskGroup, JoinWaitsForTheLastHolder)
{
    asio::io_context io;
    TaskGroup g;
    asio::steady_timer a(io, 30ms), b(io, 60ms);
    asio::co_spawn(io, task(g.enter(), a), asio::detached);
    asio::co_spawn(io, task(g.enter(), b), asio::detached);
    EXPECT_EQ(g.size(), 2u);
    std::optional<bool> joined;
    auto started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::duration took{};
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            joined = co_await g.join(std::chrono::steady_clock::now() + 5s);
            took = std::chrono::steady_clock::now() - started;
        },
        asio::detached);
    io.run();
    ASSERT_TRUE(joined.has_value());
    EXPECT_TRUE(*joined);
    EXPECT_EQ(g.size(), 0u);
    EXPECT_GE(took, 55ms) << "not before the second task ended";
    EXPECT_LT(took, 4s) << "not the deadline";
}

TEST(TaskGroup, AClosedGroupLetsNoNewTaskInButCountsOneThatMustRun)
{
    TaskGroup g;
    auto first = g.enter();
    EXPECT_TRUE(first);
    g.close();
    EXPECT_TRUE(g.closed());
    EXPECT_FALSE(g.enter()) << "the stop began: the task is not to start";
    EXPECT_EQ(g.size(), 1u);
    {
        auto accepted = g.enter_anyway(); // already accepted when the stop began: it runs, joined
        EXPECT_EQ(g.size(), 2u);
    }
    EXPECT_EQ(g.size(), 1u);
    first.release();
    EXPECT_EQ(g.size(), 0u);
    first.release(); // once
    EXPECT_EQ(g.size(), 0u);
}

TEST(TaskGroup, JoinGivesUpAtItsDeadlineAndSaysSo)
{
    asio::io_context io;
    TaskGroup g;
    asio::steady_timer forever(io, std::chrono::hours(1));
    asio::co_spawn(io, task(g.enter(), forever), asio::detached);
    std::optional<bool> joined;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            joined = co_await g.join(std::chrono::steady_clock::now() + 50ms);
            forever.cancel(); // the owner ends what the task waits on
        },
        asio::detached);
    io.run();
    ASSERT_TRUE(joined.has_value());
    EXPECT_FALSE(*joined);
    EXPECT_EQ(g.size(), 0u);
}

TEST(TaskGroup, AHoldMovesWithItsTask)
{
    TaskGroup g;
    auto a = g.enter();
    TaskGroup::Hold b = std::move(a);
    EXPECT_FALSE(a);
    EXPECT_TRUE(b);
    EXPECT_EQ(g.size(), 1u);
    TaskGroup::Hold c;
    c = std::move(b);
    EXPECT_EQ(g.size(), 1u);
    c = TaskGroup::Hold();
    EXPECT_EQ(g.size(), 0u);
}
