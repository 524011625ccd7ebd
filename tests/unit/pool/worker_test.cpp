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
