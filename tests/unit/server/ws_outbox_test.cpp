// A connection's send queue (ws/outbox.hpp) on its own, over a socketpair: written and drained (the memory
// and the budget given back), drop_oldest and close at the connection's limits and at the server-wide
// budget, control frames always taken, a half-written frame never cut, a gone peer reported.
#include "ws/outbox.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

using namespace ferry::server::detail::ws;
using ferry::conf::Overflow;

namespace {

[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

std::shared_ptr<const std::string> frame(char c, std::size_t n = 100)
{
    return std::make_shared<const std::string>(n, c);
}

// A non-blocking socketpair: `ours` is written, `theirs` read.
struct Pair {
    int ours = -1, theirs = -1;
    Pair()
    {
        int fds[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0) {
            ours = fds[0];
            theirs = fds[1];
            ::fcntl(ours, F_SETFL, ::fcntl(ours, F_GETFL) | O_NONBLOCK);
        }
    }
    ~Pair()
    {
        if (ours >= 0)
            ::close(ours);
        if (theirs >= 0)
            ::close(theirs);
    }
    std::string read_all()
    {
        std::string got;
        char buf[65536];
        ssize_t n;
        while ((n = ::recv(theirs, buf, sizeof buf, MSG_DONTWAIT)) > 0)
            got.append(buf, static_cast<std::size_t>(n));
        return got;
    }
};

} // namespace

TEST(Outbox, WritesInOrderAndGivesEverythingBackWhenDrained)
{
    ByteBudget budget(0);
    Outbox::Limits limits{10, 1 << 20, Overflow::drop_oldest};
    Outbox box(budget, limits);
    Pair p;
    box.push(frame('a'), false);
    box.push(frame('b'), true);
    EXPECT_EQ(box.pending(), 2u);
    EXPECT_EQ(budget.used(), 200u);
    EXPECT_GT(box.memory(), 0u);
    EXPECT_EQ(box.write_to(p.ours), Outbox::Written::drained);
    EXPECT_EQ(p.read_all(), std::string(100, 'a') + std::string(100, 'b'));
    EXPECT_EQ(box.pending(), 0u);
    EXPECT_EQ(box.memory(), 0u) << "an idle connection holds no queue";
    EXPECT_EQ(budget.used(), 0u);
}

TEST(Outbox, DropOldestAtTheConnectionsLimitKeepsControlFrames)
{
    ByteBudget budget(0);
    Outbox::Limits limits{3, 1 << 20, Overflow::drop_oldest};
    Outbox box(budget, limits);
    box.push(frame('a'), false);
    box.push(frame('p'), true); // a ping: never dropped
    box.push(frame('b'), false);
    auto r = box.push(frame('c'), false); // 3 waiting: the oldest message goes
    EXPECT_EQ(r.result, Outbox::Pushed::queued);
    EXPECT_EQ(r.dropped, 1u);
    EXPECT_FALSE(r.by_budget);
    EXPECT_EQ(box.pending(), 3u);
    Pair p;
    EXPECT_EQ(box.write_to(p.ours), Outbox::Written::drained);
    EXPECT_EQ(p.read_all(), std::string(100, 'p') + std::string(100, 'b') + std::string(100, 'c'));
    EXPECT_EQ(budget.used(), 0u);
}

TEST(Outbox, ControlFramesGoInPastTheLimits)
{
    ByteBudget budget(0);
    Outbox::Limits limits{1, 1 << 20, Overflow::close};
    Outbox box(budget, limits);
    box.push(frame('a'), false);
    auto r = box.push(frame('x'), true);
    EXPECT_EQ(r.result, Outbox::Pushed::queued);
    EXPECT_EQ(box.pending(), 2u);
}

TEST(Outbox, CloseAtTheLimitEmptiesTheQueueAndSaysWhatWaited)
{
    ByteBudget budget(0);
    Outbox::Limits limits{2, 1 << 20, Overflow::close};
    Outbox box(budget, limits);
    box.push(frame('a'), false);
    box.push(frame('b'), false);
    auto r = box.push(frame('c'), false);
    EXPECT_EQ(r.result, Outbox::Pushed::overflow);
    EXPECT_EQ(r.messages, 2u);
    EXPECT_EQ(r.bytes, 200u);
    EXPECT_EQ(box.pending(), 0u);
    EXPECT_EQ(budget.used(), 0u);
}

TEST(Outbox, TheServerWideBudgetDropsTheNewMessageWhenNothingOlderCanGo)
{
    ByteBudget budget(150); // one frame fits
    Outbox::Limits limits{100, 1 << 20, Overflow::drop_oldest};
    Outbox box(budget, limits);
    box.push(frame('a'), false); // an empty queue always takes one
    auto r = box.push(frame('b'), false);   // over the budget: 'a' goes, then 'b' fits
    EXPECT_EQ(r.result, Outbox::Pushed::queued);
    EXPECT_TRUE(r.by_budget);
    EXPECT_EQ(r.dropped, 1u);
    EXPECT_EQ(budget.used(), 100u);
    ByteBudget full(50); // nothing fits: the new one is dropped
    Outbox box2(full, limits);
    box2.push(frame('a'), false);
    auto r2 = box2.push(frame('b'), false);
    EXPECT_EQ(r2.result, Outbox::Pushed::dropped_new);
    EXPECT_TRUE(r2.by_budget);
    EXPECT_EQ(r2.dropped, 2u) << "the older one, then the new one";
    EXPECT_EQ(box2.pending(), 0u);
    EXPECT_EQ(box2.memory(), 0u);
}

TEST(Outbox, AHalfWrittenFrameIsNeverCut)
{
    ByteBudget budget(0);
    Outbox::Limits limits{2, 1 << 30, Overflow::drop_oldest};
    Outbox box(budget, limits);
    Pair p;
    int small = 4096;
    ::setsockopt(p.ours, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    box.push(frame('a', 1 << 20), false); // far more than the socket takes
    ASSERT_EQ(box.write_to(p.ours), Outbox::Written::blocked);
    box.push(frame('b'), false);
    auto r = box.push(frame('c'), false); // at the limit: 'b' goes, the half-written 'a' stays
    EXPECT_EQ(r.dropped, 1u);
    std::string got;
    for (int i = 0; i < 10000 && box.pending() > 0; ++i) {
        got += p.read_all();
        if (box.write_to(p.ours) == Outbox::Written::failed)
            break;
    }
    got += p.read_all();
    EXPECT_EQ(got, std::string(1 << 20, 'a') + std::string(100, 'c'));
}

TEST(Outbox, AGonePeerIsAFailedWrite)
{
    ByteBudget budget(0);
    Outbox::Limits limits{10, 1 << 20, Overflow::drop_oldest};
    Outbox box(budget, limits);
    Pair p;
    ::close(p.theirs);
    p.theirs = -1;
    box.push(frame('a'), false);
    EXPECT_EQ(box.write_to(p.ours), Outbox::Written::failed);
    box.clear();
    EXPECT_EQ(budget.used(), 0u);
}
