// ferry::peer_reset / peer_left on real loopback connections: a live peer, one that half-closed (FIN: left,
// not reset), one that reset the connection, and unread data before a FIN (still there: the answer may be
// read).
#include "ferry/base/peer.hpp"

#include "tcp_pair.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

using ferry::test::TcpPair;

namespace {
// A connected pair; `client` is the socket asked about.
class Peer : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(p.ok()); }
    bool reset() const { return ferry::peer_reset(p.client); }
    bool left() const { return ferry::peer_left(p.client); }
    TcpPair p;
};
} // namespace

TEST_F(Peer, ALiveConnectionIsNeitherResetNorLeft)
{
    EXPECT_FALSE(reset());
    EXPECT_FALSE(left());
}

TEST_F(Peer, AFinIsLeftButNotReset)
{
    p.close();
    EXPECT_FALSE(reset());
    EXPECT_TRUE(left());
}

TEST_F(Peer, AResetIsBoth)
{
    p.reset();
    EXPECT_TRUE(reset());
    EXPECT_TRUE(left());
}

TEST_F(Peer, UnreadBytesBeforeAFinAreNotLeavingAndAreNotTaken)
{
    ASSERT_EQ(::write(p.server, "x", 1), 1);
    p.close();
    EXPECT_FALSE(left()) << "a pipelined request is still to be answered";
    char c = 0;
    ASSERT_EQ(::read(p.client, &c, 1), 1) << "the peek took nothing";
    EXPECT_EQ(c, 'x');
    EXPECT_TRUE(left());
}
