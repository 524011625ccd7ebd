#include "allocator.hpp"

#include "../base/tcp_pair.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

using namespace ferry;
using namespace ferry::pool;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

// An allocator and workers without processes: a Worker is only bookkeeping until something spawns it.
struct Fixture {
    explicit Fixture(std::chrono::milliseconds timeout = 5s) : alloc(io, timeout)
    {
        alloc.discard = [this](const WorkerPtr &w) { discarded.push_back(w); };
        alloc.give_back = [this](const WorkerPtr &w) {
            given_back.push_back(w);
            alloc.offer(w);
        };
    }

    WorkerPtr worker(int pid)
    {
        auto w = std::make_shared<Worker>(io, 1 << 20);
        w->launched(pid, 0);
        return w;
    }

    void run_for(std::chrono::milliseconds d)
    {
        io.restart();
        io.run_for(d);
    }

    asio::io_context io;
    Allocator alloc;
    std::vector<WorkerPtr> discarded, given_back;
};

struct Got {
    std::optional<Allocation> allocation;
    clock_type::duration waited{};
};

awaitable<void> wait_for_worker(Allocator &a, Client client, Got &out)
{
    auto start = clock_type::now();
    out.allocation = co_await a.wait(client);
    out.waited = clock_type::now() - start;
}

} // namespace

TEST(Allocator, IdleWorkersMostRecentlyUsedFirstRetiringOnesLast)
{
    Fixture f;
    auto a = f.worker(1), b = f.worker(2), c = f.worker(3);
    EXPECT_FALSE(f.alloc.offer(a)) << "nobody waits: parked";
    EXPECT_FALSE(f.alloc.offer(b));
    EXPECT_FALSE(f.alloc.offer(c));
    EXPECT_EQ(a->state(), State::ready);
    EXPECT_EQ(f.alloc.idle(), 3u);
    c->mark(Cause::max_jobs); // past max_jobs: only when no other is idle
    EXPECT_EQ(f.alloc.take_idle(), b);
    EXPECT_EQ(b->state(), State::working);
    EXPECT_EQ(f.alloc.take_idle(), a);
    EXPECT_EQ(f.alloc.take_idle(), c);
    EXPECT_EQ(f.alloc.take_idle(), nullptr);
}

TEST(Allocator, BrokenIdleWorkersAreSkippedAndDiscarded)
{
    Fixture f;
    auto a = f.worker(1), b = f.worker(2);
    f.alloc.offer(a);
    f.alloc.offer(b);
    b->channel().expire("its stdout closed while idle"); // broken
    EXPECT_EQ(f.alloc.take_idle(), a);
    ASSERT_EQ(f.discarded.size(), 1u);
    EXPECT_EQ(f.discarded[0], b);
    EXPECT_EQ(f.alloc.idle(), 0u);
}

TEST(Allocator, HandsOffToTheOldestWaiterFirst)
{
    Fixture f;
    std::vector<Got> got(3);
    for (auto &g : got)
        asio::co_spawn(f.io, wait_for_worker(f.alloc, {}, g), asio::detached);
    f.run_for(20ms);
    ASSERT_EQ(f.alloc.waiting(), 3u);
    auto a = f.worker(1), b = f.worker(2);
    EXPECT_TRUE(f.alloc.offer(a)) << "handed over, not parked";
    EXPECT_EQ(a->state(), State::working);
    EXPECT_TRUE(f.alloc.offer(b));
    EXPECT_EQ(f.alloc.idle(), 0u);
    f.run_for(20ms);
    ASSERT_TRUE(got[0].allocation && got[1].allocation);
    EXPECT_EQ(got[0].allocation->worker, a);
    EXPECT_EQ(got[0].allocation->outcome, Outcome::ok);
    EXPECT_EQ(got[1].allocation->worker, b);
    EXPECT_FALSE(got[2].allocation.has_value()) << "the third still waits";
    EXPECT_EQ(f.alloc.waiting(), 1u);
}

TEST(Allocator, AWaiterTimesOut)
{
    Fixture f(50ms);
    Got g;
    asio::co_spawn(f.io, wait_for_worker(f.alloc, {}, g), asio::detached);
    f.run_for(300ms);
    ASSERT_TRUE(g.allocation.has_value());
    EXPECT_EQ(g.allocation->worker, nullptr);
    EXPECT_EQ(g.allocation->outcome, Outcome::no_worker);
    EXPECT_NE(g.allocation->why.find("allocate_timeout (50 ms)"), std::string::npos) << g.allocation->why;
    EXPECT_GE(g.waited, 50ms);
    EXPECT_EQ(f.alloc.waiting(), 0u);
    // A worker released afterwards is parked, not handed to the waiter that left.
    auto a = f.worker(1);
    EXPECT_FALSE(f.alloc.offer(a));
}

TEST(Allocator, ShutdownFailsEveryWaiterAtOnce)
{
    Fixture f;
    std::vector<Got> got(2);
    for (auto &g : got)
        asio::co_spawn(f.io, wait_for_worker(f.alloc, {}, g), asio::detached);
    f.run_for(20ms);
    ASSERT_EQ(f.alloc.waiting(), 2u);
    f.alloc.fail_waiters("server is shutting down");
    EXPECT_EQ(f.alloc.waiting(), 0u);
    f.run_for(20ms);
    for (auto &g : got) {
        ASSERT_TRUE(g.allocation.has_value());
        EXPECT_EQ(g.allocation->outcome, Outcome::no_worker);
        EXPECT_EQ(g.allocation->why, "server is shutting down");
        EXPECT_LT(g.waited, 1s);
    }
}

TEST(Allocator, AClientGoneAfterALongWaitIsDroppedAndItsWorkerGoesToTheNextWaiter)
{
    Fixture f;
    ferry::test::TcpPair gone; // a client that reset its connection
    ASSERT_TRUE(gone.ok());
    gone.reset();
    Got first, second;
    asio::co_spawn(f.io, wait_for_worker(f.alloc, Client{gone.client}, first), asio::detached);
    asio::co_spawn(f.io, wait_for_worker(f.alloc, {}, second), asio::detached);
    f.run_for(30ms); // longer than a client is expected to wait without a reason
    auto a = f.worker(1);
    f.alloc.offer(a);
    f.run_for(20ms);
    ASSERT_TRUE(first.allocation && second.allocation);
    EXPECT_EQ(first.allocation->outcome, Outcome::client_gone);
    EXPECT_EQ(first.allocation->worker, nullptr);
    ASSERT_EQ(f.given_back.size(), 1u);
    EXPECT_EQ(second.allocation->worker, a) << "given back to the next waiter";
    EXPECT_EQ(f.alloc.dropped(), 1u);
}

TEST(Allocator, AQuickHandOffDoesNotAskTheClient)
{
    Fixture f;
    ferry::test::TcpPair gone; // reset, but not asked: it gets the worker
    ASSERT_TRUE(gone.ok());
    gone.reset();
    Got g;
    asio::co_spawn(f.io, wait_for_worker(f.alloc, Client{gone.client}, g), asio::detached);
    f.io.poll(); // queued
    ASSERT_EQ(f.alloc.waiting(), 1u);
    auto a = f.worker(1);
    f.alloc.offer(a);
    f.run_for(20ms);
    ASSERT_TRUE(g.allocation.has_value());
    EXPECT_EQ(g.allocation->worker, a) << "a request that hardly waited is not asked about (no system call)";
    EXPECT_EQ(f.alloc.dropped(), 0u);
}

TEST(Allocator, AQueuedRequestWhoseFrameIsDestroyedLeavesTheQueue)
{
    // The loop stopped for good with a request waiting (the server destroys its handlers): the waiter goes
    // with its frame, and a worker released later is parked instead of handed to it.
    asio::io_context other; // the released worker's (it must outlive the allocator, which parks it)
    auto io = std::make_unique<asio::io_context>();
    Allocator alloc(*io, 5s);
    Got g;
    asio::co_spawn(*io, wait_for_worker(alloc, {}, g), asio::detached);
    io->poll();
    ASSERT_EQ(alloc.waiting(), 1u);
    io.reset();
    EXPECT_EQ(alloc.waiting(), 0u);
    EXPECT_FALSE(g.allocation.has_value());
    auto w = std::make_shared<Worker>(other, 1 << 20);
    EXPECT_FALSE(alloc.offer(w));
}

TEST(Allocator, FramesOutlivingTheAllocatorDoNotTouchIt)
{
    asio::io_context io;
    auto alloc = std::make_unique<Allocator>(io, 5s);
    Got g;
    asio::co_spawn(io, wait_for_worker(*alloc, {}, g), asio::detached);
    io.poll();
    ASSERT_EQ(alloc->waiting(), 1u);
    alloc.reset(); // the waiter is detached; its frame goes with `io` below (ASan checks the order)
}
