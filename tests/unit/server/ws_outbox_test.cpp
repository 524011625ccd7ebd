// A connection's send queue (ws/outbox.hpp) on its own, writing to a Stream over a socketpair: written and
// drained (the memory and the budget given back), drop_oldest and close at the connection's limits and at the
// server-wide budget (which never takes a queue's newest message), control frames always taken, a
// half-written frame never cut, a gone peer reported.
#include "ws/outbox.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

using namespace ferry::server::detail::ws;
using ferry::conf::Overflow;
using ferry::server::detail::Stream;

namespace {

[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

std::shared_ptr<const std::string> frame(char c, std::size_t n = 100)
{
    return std::make_shared<const std::string>(n, c);
}

// A socketpair: `ours` is the Stream written (as a connection's), `theirs` the descriptor read.
struct Pair {
    ferry::asio::io_context io;
    int fds[2] = {-1, -1};
    bool made = ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0;
    int theirs = fds[1];
    Stream ours{adopt(io, fds[0])};

    static ferry::server::detail::StreamSocket adopt(ferry::asio::io_context &io, int fd)
    {
        ferry::server::detail::StreamSocket s(io);
        s.assign(ferry::server::detail::tcp::v4(), fd);
        return s;
    }
    ~Pair()
    {
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

// An outbox with its budget (0: no limit) and limits (max_bytes 1 GiB unless given).
struct Box {
    Box(std::size_t max_messages, Overflow overflow, std::uint64_t budget_limit = 0)
        : budget(budget_limit), limits{max_messages, 1u << 30, overflow}, box(budget, limits)
    {
    }
    ByteBudget budget;
    Outbox::Limits limits;
    Outbox box;
};

// Writes what `b` holds to `p` while reading the other end, until nothing waits: what arrived.
std::string drain(Box &b, Pair &p)
{
    std::string got;
    for (int i = 0; i < 10000 && b.box.pending() > 0; ++i) {
        got += p.read_all();
        if (b.box.write_to(p.ours) == Outbox::Written::failed)
            break;
    }
    return got + p.read_all();
}

} // namespace

TEST(Outbox, WritesInOrderAndGivesEverythingBackWhenDrained)
{
    Box b(10, Overflow::drop_oldest);
    Pair p;
    b.box.push(frame('a'), false);
    b.box.push(frame('b'), true);
    EXPECT_EQ(b.box.pending(), 2u);
    EXPECT_EQ(b.budget.used(), 200u);
    EXPECT_GT(b.box.memory(), 0u);
    EXPECT_EQ(b.box.write_to(p.ours), Outbox::Written::drained);
    EXPECT_EQ(p.read_all(), std::string(100, 'a') + std::string(100, 'b'));
    EXPECT_EQ(b.box.pending(), 0u);
    EXPECT_EQ(b.box.memory(), 0u) << "an idle connection holds no queue";
    EXPECT_EQ(b.budget.used(), 0u);
}

TEST(Outbox, DropOldestAtTheConnectionsLimitKeepsControlFrames)
{
    Box b(3, Overflow::drop_oldest);
    b.box.push(frame('a'), false);
    b.box.push(frame('p'), true); // a ping: never dropped
    b.box.push(frame('b'), false);
    auto r = b.box.push(frame('c'), false); // 3 waiting: the oldest message goes
    EXPECT_EQ(r.result, Outbox::Pushed::queued);
    EXPECT_EQ(r.dropped, 1u);
    EXPECT_FALSE(r.by_budget);
    EXPECT_EQ(b.box.pending(), 3u);
    Pair p;
    EXPECT_EQ(b.box.write_to(p.ours), Outbox::Written::drained);
    EXPECT_EQ(p.read_all(), std::string(100, 'p') + std::string(100, 'b') + std::string(100, 'c'));
    EXPECT_EQ(b.budget.used(), 0u);
}

TEST(Outbox, ControlFramesGoInPastTheLimits)
{
    Box b(1, Overflow::close);
    b.box.push(frame('a'), false);
    auto r = b.box.push(frame('x'), true);
    EXPECT_EQ(r.result, Outbox::Pushed::queued);
    EXPECT_EQ(b.box.pending(), 2u);
}

TEST(Outbox, CloseAtTheLimitEmptiesTheQueueAndSaysWhatWaited)
{
    Box b(2, Overflow::close);
    b.box.push(frame('a'), false);
    b.box.push(frame('b'), false);
    auto r = b.box.push(frame('c'), false);
    EXPECT_EQ(r.result, Outbox::Pushed::overflow);
    EXPECT_EQ(r.messages, 2u);
    EXPECT_EQ(r.bytes, 200u);
    EXPECT_EQ(b.box.pending(), 0u);
    EXPECT_EQ(b.budget.used(), 0u);
}

TEST(Outbox, TheServerWideBudgetDropsOlderMessagesButKeepsTheNewest)
{
    Box b(100, Overflow::drop_oldest, 150);
    b.box.push(frame('a'), false);          // an empty queue always takes one
    auto r = b.box.push(frame('b'), false); // over the budget: 'a' goes, then 'b' fits
    EXPECT_EQ(r.result, Outbox::Pushed::queued);
    EXPECT_TRUE(r.by_budget);
    EXPECT_EQ(r.dropped, 1u);
    EXPECT_EQ(b.budget.used(), 100u);
    Box full(100, Overflow::drop_oldest, 50); // nothing fits: the older one goes, the newest stays
    Outbox &box2 = full.box;
    box2.push(frame('a'), false);
    auto r2 = box2.push(frame('b'), false);
    EXPECT_EQ(r2.result, Outbox::Pushed::queued);
    EXPECT_TRUE(r2.by_budget);
    EXPECT_EQ(r2.dropped, 1u);
    EXPECT_EQ(box2.pending(), 1u);
    EXPECT_EQ(full.budget.used(), 100u) << "over the budget by one message";
    Pair p;
    EXPECT_EQ(box2.write_to(p.ours), Outbox::Written::drained);
    EXPECT_EQ(p.read_all(), std::string(100, 'b'));
    EXPECT_EQ(full.budget.used(), 0u);
}

// A client that stopped reading mid-frame, while other connections hold the whole budget: its queue keeps
// the frame being written and its newest message (CI once saw such a client get nothing past message 91).
TEST(Outbox, AQueueHoldingOnlyAHalfWrittenFrameStillTakesTheNewestPastAFullBudget)
{
    Box b(100, Overflow::drop_oldest, 1 << 20);
    Pair p;
    int small = 4096;
    ::setsockopt(p.ours.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    b.box.push(frame('a', 1 << 20), false);
    ASSERT_EQ(b.box.write_to(p.ours), Outbox::Written::blocked);
    b.budget.take(1 << 20); // the other connections fill the budget
    ASSERT_FALSE(b.budget.try_take(100));
    for (char c : {'b', 'c', 'd'}) {
        auto r = b.box.push(frame(c), false);
        EXPECT_EQ(r.result, Outbox::Pushed::queued) << c;
    }
    EXPECT_EQ(b.box.pending(), 2u) << "the half-written frame and the newest message";
    const std::string got = drain(b, p);
    EXPECT_EQ(got, std::string(1 << 20, 'a') + std::string(100, 'd'));
    b.budget.give(1 << 20);
    EXPECT_EQ(b.budget.used(), 0u);
}

TEST(Outbox, AHalfWrittenFrameIsNeverCut)
{
    Box b(2, Overflow::drop_oldest);
    Pair p;
    int small = 4096;
    ::setsockopt(p.ours.native_handle(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    b.box.push(frame('a', 1 << 20), false); // far more than the socket takes
    ASSERT_EQ(b.box.write_to(p.ours), Outbox::Written::blocked);
    b.box.push(frame('b'), false);
    auto r = b.box.push(frame('c'), false); // at the limit: 'b' goes, the half-written 'a' stays
    EXPECT_EQ(r.dropped, 1u);
    const std::string got = drain(b, p);
    EXPECT_EQ(got, std::string(1 << 20, 'a') + std::string(100, 'c'));
}

TEST(Outbox, AGonePeerIsAFailedWrite)
{
    Box b(10, Overflow::drop_oldest);
    Pair p;
    ::close(p.theirs);
    p.theirs = -1;
    b.box.push(frame('a'), false);
    EXPECT_EQ(b.box.write_to(p.ours), Outbox::Written::failed);
    b.box.clear();
    EXPECT_EQ(b.budget.used(), 0u);
}
