#include "spawn.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

using namespace ferry::pool::detail;

TEST(Spawn, FindsExecutablesInPath)
{
    std::string php = find_executable("php");
    ASSERT_FALSE(php.empty());
    EXPECT_EQ(php.front(), '/');
    EXPECT_EQ(find_executable("/bin/sh"), "/bin/sh");
    EXPECT_EQ(find_executable("ferry-no-such-program-xyz"), "");
    EXPECT_EQ(find_executable(""), "");
}

TEST(Spawn, EnvironmentEntriesReplaceInheritedOnes)
{
    ::setenv("FERRY_SPAWN_TEST", "old", 1);
    auto env = build_environment({"FERRY_SPAWN_TEST=new", "RR_MODE=http"});
    EXPECT_EQ(std::count(env.begin(), env.end(), "FERRY_SPAWN_TEST=new"), 1);
    EXPECT_EQ(std::count(env.begin(), env.end(), "FERRY_SPAWN_TEST=old"), 0);
    EXPECT_EQ(std::count(env.begin(), env.end(), "RR_MODE=http"), 1);
    EXPECT_NE(
        std::find_if(env.begin(), env.end(), [](const std::string &s) { return s.rfind("PATH=", 0) == 0; }),
        env.end());
}
