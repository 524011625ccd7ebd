// The control listeners' connection slots (control/conn_slots.*): a new caller always gets in while an idle
// connection can make room; the one closed is a silent one first, then the one idle the longest.
#include "control/conn_slots.hpp"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

using namespace ferry::server::detail;

namespace {

ControlCounters counters; // the server's (ServerCounters::control)

std::uint64_t closed(ControlListener l, CloseReason r)
{
    return counters.snapshot().n[static_cast<unsigned>(l)][static_cast<unsigned>(r)];
}

} // namespace

TEST(ConnSlots, TheOldestIdleMakesRoomSilentOnesFirst)
{
    ConnSlots slots(counters, ControlListener::metrics, 3, "test");
    std::vector<int> closes;
    auto close_of = [&closes](int i) { return [&closes, i] { closes.push_back(i); }; };
    auto a = slots.admit("a", close_of(0));
    auto b = slots.admit("b", close_of(1));
    auto c = slots.admit("c", close_of(2));
    ASSERT_TRUE(a && b && c);
    a->spoke(); // a caller between calls: idle, but it talked
    b->spoke();
    b->busy(true); // b is answering
    const auto before = closed(ControlListener::metrics, CloseReason::idle);
    auto d = slots.admit("d", close_of(3));
    ASSERT_TRUE(d);
    EXPECT_EQ(closes, std::vector<int>{2}) << "c never sent a byte: it goes before a, which is older";
    EXPECT_EQ(closed(ControlListener::metrics, CloseReason::idle), before + 1);
    EXPECT_EQ(slots.live(), 3u);
    d->spoke();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    a->busy(false); // a idle since now: d (idle since it came) is older
    auto e = slots.admit("e", close_of(4));
    ASSERT_TRUE(e);
    EXPECT_EQ(closes, (std::vector<int>{2, 3}));
    c.reset(); // the closed session ends: no slot counted twice
    d.reset();
    EXPECT_EQ(slots.live(), 3u);
}

TEST(ConnSlots, EveryoneBusyRefusesTheNewOne)
{
    ConnSlots slots(counters, ControlListener::rpc, 2, "test");
    auto a = slots.admit("a", [] {});
    auto b = slots.admit("b", [] {});
    a->busy(true);
    b->busy(true);
    const auto before = closed(ControlListener::rpc, CloseReason::limit);
    EXPECT_FALSE(slots.admit("c", [] {}));
    EXPECT_EQ(closed(ControlListener::rpc, CloseReason::limit), before + 1);
    b.reset();
    EXPECT_TRUE(slots.admit("d", [] {})) << "a slot freed";
}

TEST(ConnSlots, AStopClosesEveryConnectionOnceBusyOnesToo)
{
    ConnSlots slots(counters, ControlListener::status, 4, "test");
    std::vector<int> closes;
    auto a = slots.admit("a", [&closes] { closes.push_back(0); });
    auto b = slots.admit("b", [&closes] { closes.push_back(1); });
    auto c = slots.admit("c", [&closes] { closes.push_back(2); });
    b->busy(true);
    a.reset(); // a's session ended before the stop: its close is not called
    const auto before = counters.snapshot();
    slots.close_all();
    EXPECT_EQ(closes, (std::vector<int>{1, 2}));
    EXPECT_EQ(slots.live(), 0u);
    slots.close_all(); // a second stop (status and metrics sharing the listener) closes nothing twice
    EXPECT_EQ(closes, (std::vector<int>{1, 2}));
    const auto after = counters.snapshot();
    for (unsigned r = 0; r < close_reasons; ++r)
        EXPECT_EQ(after.n[static_cast<unsigned>(ControlListener::status)][r],
                  before.n[static_cast<unsigned>(ControlListener::status)][r])
            << "a stop is not a close to count";
    b.reset();
    c.reset();
    EXPECT_EQ(slots.live(), 0u);
}
