// Pools: the server's pools by plugin name, in start order, for control, status, metrics and RPC.
#include "pools.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

using ferry::server::detail::Pools;

TEST(Pools, FindsByNameInStartOrderAndNamesWhatThereIs)
{
    boost::asio::io_context io;
    const auto host = std::make_shared<ferry::pool::Host>();
    ferry::pool::Pool http{host, io, ferry::pool::Options{}}, ws{host, io, ferry::pool::Options{}};
    Pools pools;
    EXPECT_EQ(pools.find("http"), nullptr);
    EXPECT_EQ(pools.names(), "");
    pools.add("http", http);
    EXPECT_EQ(pools.names(), "http");
    pools.add("websockets", ws);
    EXPECT_EQ(pools.find("http"), &http);
    EXPECT_EQ(pools.find("websockets"), &ws);
    EXPECT_EQ(pools.find("jobs"), nullptr);
    EXPECT_EQ(pools.find("HTTP"), nullptr); // plugin names are matched as written, as RoadRunner does
    ASSERT_EQ(pools.all().size(), 2u);
    EXPECT_EQ(pools.all()[0].name, "http");
    EXPECT_EQ(pools.names(), "http, websockets");
}
