// ferry::peer_reset / peer_left on real loopback connections: a live peer, one that half-closed (FIN: left,
// not reset), one that reset the connection, and unread data before a FIN (still there: the answer may be
// read).
#include "ferry/base/peer.hpp"

#include "tcp_pair.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

using ferry::test::TcpPair;

TEST(Peer, ALiveConnectionIsNeitherResetNorLeft)
{
    TcpPair p;
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(ferry::peer_reset(p.client));
    EXPECT_FALSE(ferry::peer_left(p.client));
}

TEST(Peer, AFinIsLeftButNotReset)
{
    TcpPair p;
    ASSERT_TRUE(p.ok());
    p.close();
    EXPECT_FALSE(ferry::peer_reset(p.client));
    EXPECT_TRUE(ferry::peer_left(p.client));
}

TEST(Peer, AResetIsBoth)
{
    TcpPair p;
    ASSERT_TRUE(p.ok());
    p.reset();
    EXPECT_TRUE(ferry::peer_reset(p.client));
    EXPECT_TRUE(ferry::peer_left(p.client));
}

TEST(Peer, UnreadBytesBeforeAFinAreNotLeavingAndAreNotTaken)
{
    TcpPair p;
    ASSERT_TRUE(p.ok());
    ASSERT_EQ(::write(p.server, "x", 1), 1);
    p.close();
    EXPECT_FALSE(ferry::peer_left(p.client)) << "a pipelined request is still to be answered";
    char c = 0;
    ASSERT_EQ(::read(p.client, &c, 1), 1) << "the peek took nothing";
    EXPECT_EQ(c, 'x');
    EXPECT_TRUE(ferry::peer_left(p.client));
}
