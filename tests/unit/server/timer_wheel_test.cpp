#include "transport/timer_wheel.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace ferry::server::detail;
using namespace std::chrono_literals;

namespace {

struct Fixture {
    steady::time_point t0 = steady::now();
    TimerWheel wheel{100ms, 8, t0};
    std::vector<WheelEntry *> fired;

    void advance_to(std::chrono::milliseconds at)
    {
        wheel.advance(t0 + at, [this](WheelEntry &e) { fired.push_back(&e); });
    }
};

} // namespace

TEST(TimerWheel, FiresAtOrAfterTheDeadlineWithinATick)
{
    Fixture f;
    WheelEntry a, b;
    f.wheel.schedule(a, f.t0 + 250ms);
    f.wheel.schedule(b, f.t0 + 430ms);
    f.advance_to(200ms);
    EXPECT_TRUE(f.fired.empty());
    f.advance_to(249ms);
    EXPECT_TRUE(f.fired.empty());
    f.advance_to(300ms);
    ASSERT_EQ(f.fired.size(), 1u);
    EXPECT_EQ(f.fired[0], &a);
    f.advance_to(500ms);
    ASSERT_EQ(f.fired.size(), 2u);
    EXPECT_EQ(f.fired[1], &b);
    EXPECT_EQ(f.wheel.size(), 0u);
}

TEST(TimerWheel, LaterDeadlinesMoveLazilyEarlierOnesAtOnce)
{
    Fixture f;
    WheelEntry a;
    f.wheel.schedule(a, f.t0 + 200ms);
    f.wheel.schedule(a, f.t0 + 650ms); // later: stays in its slot until then
    f.advance_to(300ms);
    EXPECT_TRUE(f.fired.empty());
    EXPECT_EQ(f.wheel.size(), 1u);
    f.wheel.schedule(a, f.t0 + 350ms); // earlier than where it sits now: moved
    f.advance_to(400ms);
    ASSERT_EQ(f.fired.size(), 1u);
}

TEST(TimerWheel, CancelledEntriesLeaveWithoutFiring)
{
    Fixture f;
    WheelEntry a;
    f.wheel.schedule(a, f.t0 + 100ms);
    f.wheel.cancel(a);
    f.advance_to(1s);
    EXPECT_TRUE(f.fired.empty());
    EXPECT_EQ(f.wheel.size(), 0u);
}

TEST(TimerWheel, DeadlinesBeyondOneRevolutionWaitTheirRound)
{
    Fixture f; // 8 slots of 100 ms: one revolution is 800 ms
    WheelEntry a;
    f.wheel.schedule(a, f.t0 + 2050ms);
    for (int ms = 100; ms <= 2000; ms += 100) {
        f.advance_to(std::chrono::milliseconds(ms));
        ASSERT_TRUE(f.fired.empty()) << ms;
    }
    f.advance_to(2100ms);
    EXPECT_EQ(f.fired.size(), 1u);
}

TEST(TimerWheel, RemoveUnlinks)
{
    Fixture f;
    WheelEntry a, b, c;
    f.wheel.schedule(a, f.t0 + 100ms);
    f.wheel.schedule(b, f.t0 + 100ms);
    f.wheel.schedule(c, f.t0 + 100ms);
    f.wheel.remove(b);
    EXPECT_EQ(f.wheel.size(), 2u);
    f.advance_to(200ms);
    ASSERT_EQ(f.fired.size(), 2u);
    EXPECT_EQ(f.fired[0], &a);
    EXPECT_EQ(f.fired[1], &c);
}

TEST(TimerWheel, ATickVisitsOnlyWhatIsDue)
{
    // 10,000 idle entries with a far deadline and one due: the due one fires, and an idle entry is looked
    // at once per revolution at most, not once per tick.
    steady::time_point t0 = steady::now();
    TimerWheel wheel(250ms, 512, t0);
    std::vector<WheelEntry> idle(10000);
    for (auto &e : idle)
        wheel.schedule(e, t0 + 75s);
    WheelEntry due;
    wheel.schedule(due, t0 + 500ms);
    int fired = 0;
    for (int i = 1; i <= 40; ++i) // 10 s of ticks
        wheel.advance(t0 + i * 250ms, [&](WheelEntry &e) {
            EXPECT_EQ(&e, &due);
            ++fired;
        });
    EXPECT_EQ(fired, 1);
    EXPECT_EQ(wheel.size(), idle.size());
    EXPECT_EQ(wheel.visits(), 1u) << "idle entries were looked at before their slot came due";
}
