#include "ferry/base/result.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace {

ferry::Result<int> half(int x)
{
    if (x % 2 != 0)
        return ferry::fail("odd: " + std::to_string(x));
    return x / 2;
}

ferry::Result<void> check(bool ok)
{
    if (!ok)
        return ferry::fail("not ok");
    return {};
}

} // namespace

TEST(Result, HoldsAValueOrAnErrorWithItsMessage)
{
    auto a = half(4);
    ASSERT_TRUE(a);
    EXPECT_EQ(*a, 2);
    auto b = half(3);
    ASSERT_FALSE(b);
    EXPECT_EQ(b.error().message, "odd: 3");
    EXPECT_TRUE(check(true));
    EXPECT_EQ(check(false).error().message, "not ok");
}

TEST(Result, ValueOfAnErrorIsABug)
{
    auto b = half(5);
    EXPECT_THROW((void)b.value(), std::logic_error);
}
