#include "worker.hpp"

#include <gtest/gtest.h>

#include <csignal>

using namespace ferry::pool;

TEST(WorkerState, DescribesExits)
{
    EXPECT_EQ(describe_status(3 << 8), "exited with code 3");
    EXPECT_EQ(describe_status(SIGKILL), "killed by signal 9 (SIGKILL)");
    EXPECT_STREQ(state_name(State::working), "working");
}

TEST(WorkerState, MovesOnlyAlongTheTable)
{
    // Every move a worker makes in the pool, and the ones it must never make.
    EXPECT_TRUE(allowed_move(State::spawning, State::ready));
    EXPECT_TRUE(allowed_move(State::spawning, State::stopping)); // stopped while booting
    EXPECT_TRUE(allowed_move(State::ready, State::working));
    EXPECT_TRUE(allowed_move(State::working, State::ready));
    EXPECT_TRUE(allowed_move(State::working, State::stopping));
    EXPECT_TRUE(allowed_move(State::stopping, State::dead));
    EXPECT_TRUE(allowed_move(State::ready, State::ready));     // staying: a no-op
    EXPECT_FALSE(allowed_move(State::stopping, State::ready)); // after its stop frame it takes no request
    EXPECT_FALSE(allowed_move(State::stopping, State::working));
    EXPECT_FALSE(allowed_move(State::dead, State::ready));
    EXPECT_FALSE(allowed_move(State::ready, State::spawning));

    boost::asio::io_context io;
    Worker w(io, 1024);
    EXPECT_EQ(w.state(), State::spawning);
    EXPECT_TRUE(w.to(State::ready));
    EXPECT_TRUE(w.to(State::stopping));
    EXPECT_FALSE(w.to(State::working)); // refused: nothing changes
    EXPECT_EQ(w.state(), State::stopping);
    EXPECT_TRUE(w.to(State::dead));
    EXPECT_FALSE(w.to(State::ready));
    EXPECT_EQ(w.state(), State::dead);
}

TEST(WorkerRecycle, MovesOnlyForwardButAMarkedOneMayServeOn)
{
    EXPECT_TRUE(allowed_recycle(Recycle::serving, Recycle::marked));      // a limit, a reset
    EXPECT_TRUE(allowed_recycle(Recycle::serving, Recycle::on_release));  // a stop while it works
    EXPECT_TRUE(allowed_recycle(Recycle::marked, Recycle::replaced));     // its early replacement is ready
    EXPECT_TRUE(allowed_recycle(Recycle::marked, Recycle::on_release));   // its replacement is ready
    EXPECT_TRUE(allowed_recycle(Recycle::marked, Recycle::serving));      // replacements cannot boot
    EXPECT_TRUE(allowed_recycle(Recycle::replaced, Recycle::on_release)); // a reset while it serves on
    EXPECT_FALSE(allowed_recycle(Recycle::serving, Recycle::replaced));   // replaced without being marked
    EXPECT_FALSE(allowed_recycle(Recycle::replaced, Recycle::serving));
    EXPECT_FALSE(allowed_recycle(Recycle::replaced, Recycle::marked));
    EXPECT_FALSE(allowed_recycle(Recycle::on_release, Recycle::serving));
    EXPECT_FALSE(allowed_recycle(Recycle::on_release, Recycle::marked));
    EXPECT_STREQ(recycle_name(Recycle::on_release), "on_release");

    boost::asio::io_context io;
    Worker w(io, 1024);
    EXPECT_FALSE(w.going());
    EXPECT_FALSE(w.recycle_to(Recycle::replaced)); // refused: nothing changes
    EXPECT_EQ(w.recycle(), Recycle::serving);
    w.mark(Cause::max_jobs);
    EXPECT_EQ(w.recycle(), Recycle::marked);
    EXPECT_EQ(w.cause(), Cause::max_jobs);
    EXPECT_TRUE(w.going());
    EXPECT_TRUE(w.recycle_to(Recycle::replaced));
    // A reset marks it again: the cause is the reset's, the phase stays (it is further on).
    w.mark(Cause::reset);
    EXPECT_EQ(w.recycle(), Recycle::replaced);
    EXPECT_EQ(w.cause(), Cause::reset);
    EXPECT_TRUE(w.recycle_to(Recycle::on_release));
    EXPECT_FALSE(w.recycle_to(Recycle::serving));
    EXPECT_EQ(w.recycle(), Recycle::on_release);
    w.blame_if_none(Cause::crash); // decided already: kept
    EXPECT_EQ(w.cause(), Cause::reset);
}
