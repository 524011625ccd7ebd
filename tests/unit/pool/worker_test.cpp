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
