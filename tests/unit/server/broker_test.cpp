// The broker's pieces that need no Redis (broker/): RESP replies out of bytes however they are split, and
// refused when they are not Redis's; commands as Redis reads them; the envelope between nodes and the
// payload of a frame; event ids unique across nodes. The broker against a real redis-server:
// tests/e2e/test_broker.py.
#include "broker/envelope.hpp"
#include "broker/redis_broker.hpp"
#include "broker/resp.hpp"
#include "ws/frame.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <set>
#include <thread>

using namespace ferry::server::detail;
using broker::Reply;
using broker::ReplyReader;

namespace {

std::vector<Reply> read_all(ReplyReader &r, const std::string &bytes, std::size_t step)
{
    std::vector<Reply> out;
    for (std::size_t i = 0; i < bytes.size(); i += step) {
        EXPECT_TRUE(r.feed(bytes.data() + i, std::min(step, bytes.size() - i))) << r.error();
        Reply one;
        while (r.next(one) == ReplyReader::Got::reply)
            out.push_back(std::move(one));
    }
    return out;
}

} // namespace

TEST(BrokerResp, RepliesOutOfAnySplit)
{
    const std::string bytes = "+PONG\r\n:3\r\n$-1\r\n-ERR wrong\r\n"
                              "*3\r\n$7\r\nmessage\r\n$9\r\nferry:t:x\r\n$5\r\nhe\r\no\r\n"
                              "*2\r\n*1\r\n:1\r\n$0\r\n\r\n";
    for (std::size_t step : {std::size_t(1), std::size_t(3), std::size_t(7), bytes.size()}) {
        ReplyReader r;
        auto got = read_all(r, bytes, step);
        ASSERT_EQ(got.size(), 6u) << "step " << step;
        EXPECT_TRUE(got[0].is_status("PONG"));
        EXPECT_EQ(got[1].type, Reply::Type::integer);
        EXPECT_EQ(got[1].integer, 3);
        EXPECT_EQ(got[2].type, Reply::Type::nil);
        EXPECT_EQ(got[3].type, Reply::Type::error);
        EXPECT_EQ(got[3].str, "ERR wrong");
        ASSERT_EQ(got[4].elements.size(), 3u);
        EXPECT_EQ(got[4].elements[0].str, "message");
        EXPECT_EQ(got[4].elements[2].str, std::string("he\r\no")) << "binary-safe";
        ASSERT_EQ(got[5].elements.size(), 2u);
        EXPECT_EQ(got[5].elements[0].elements[0].integer, 1);
        EXPECT_EQ(got[5].elements[1].str, "");
    }
}

TEST(BrokerResp, WhatIsNotRedisIsRefused)
{
    {
        ReplyReader r;
        Reply one;
        r.feed("HTTP/1.1 400 Bad Request\r\n\r\n", 28);
        EXPECT_EQ(r.next(one), ReplyReader::Got::error);
        EXPECT_NE(r.error().find("Protocol error"), std::string::npos) << r.error();
        EXPECT_FALSE(r.feed("+OK\r\n", 5)) << "an error stays";
    }
    {
        ReplyReader r(1000);
        Reply one;
        const std::string huge = "*100000000\r\n";
        r.feed(huge.data(), huge.size());
        EXPECT_EQ(r.next(one), ReplyReader::Got::error);
        EXPECT_EQ(r.error(), "an array of more than 1000 items");
    }
    {
        ReplyReader r(1000, 1024);
        const std::string big = "$100000\r\n" + std::string(2000, 'x');
        EXPECT_FALSE(r.feed(big.data(), big.size()));
        EXPECT_NE(r.error().find("a reply of more than"), std::string::npos) << r.error();
    }
}

TEST(BrokerResp, CommandsAsRedisReadsThem)
{
    std::string out;
    broker::append_command(out, {"PUBLISH", "ferry:t:x", std::string_view("a\0b", 3)});
    static const char want[] = "*3\r\n$7\r\nPUBLISH\r\n$9\r\nferry:t:x\r\n$3\r\na\0b\r\n";
    EXPECT_EQ(out, std::string(want, sizeof want - 1));
}

TEST(BrokerEnvelope, RoundTripsEachKind)
{
    broker::Envelope p;
    p.origin = "web-1";
    p.topics = {"a", "b"};
    p.topic = 1;
    p.binary = true;
    p.event_id = 1ull << 60;
    p.payload = std::string("\0\xff\x01", 3);
    std::string why;
    auto back = broker::decode(broker::encode(p), why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->origin, "web-1");
    EXPECT_EQ(back->topics, p.topics);
    EXPECT_EQ(back->topic, 1u);
    EXPECT_TRUE(back->binary);
    EXPECT_EQ(back->event_id, 1ull << 60);
    EXPECT_EQ(back->payload, p.payload);

    broker::Envelope c;
    c.kind = broker::Envelope::Kind::close;
    c.origin = "n";
    c.ids = {(1ull << 40) | 7};
    c.code = 4000;
    c.payload = "kicked";
    back = broker::decode(broker::encode(c), why);
    ASSERT_TRUE(back) << why;
    EXPECT_EQ(back->kind, broker::Envelope::Kind::close);
    EXPECT_EQ(back->ids, c.ids);
    EXPECT_EQ(back->code, 4000);
    EXPECT_EQ(back->payload, "kicked");
}

TEST(BrokerEnvelope, GarbageIsRefusedWithAReason)
{
    std::string why;
    EXPECT_FALSE(broker::decode("hello", why));
    EXPECT_FALSE(why.empty());
    EXPECT_FALSE(broker::decode("", why));
    broker::Envelope p;
    p.topics = {"a"};
    p.topic = 3;
    EXPECT_FALSE(broker::decode(broker::encode(p), why));
    EXPECT_EQ(why, "topic index out of its list");
    std::string bytes = broker::encode(broker::Envelope{});
    bytes[1] = 9; // the version (a positive fixint after the array's header)
    EXPECT_FALSE(broker::decode(bytes, why));
    EXPECT_NE(why.find("format version 9"), std::string::npos) << why;
    // Every prefix of a good envelope is refused, never read past its end.
    const std::string good = broker::encode(p);
    for (std::size_t n = 0; n < good.size(); ++n)
        EXPECT_FALSE(broker::decode(std::string_view(good).substr(0, n), why)) << n;
}

TEST(BrokerEnvelope, PayloadOfAFrame)
{
    for (std::size_t size : {0u, 125u, 126u, 65535u, 65536u, 200000u}) {
        const std::string payload(size, 'p');
        const std::string frame = ws::encode_frame(ws::Opcode::binary, payload);
        std::string_view got;
        bool binary = false;
        ASSERT_TRUE(broker::frame_payload(frame, got, binary)) << size;
        EXPECT_TRUE(binary);
        EXPECT_EQ(got.size(), size);
        EXPECT_FALSE(broker::frame_payload(std::string_view(frame).substr(0, frame.size() - 1), got, binary));
    }
    std::string_view got;
    bool binary = true;
    const std::string text = ws::encode_frame(ws::Opcode::text, "hi");
    ASSERT_TRUE(broker::frame_payload(text, got, binary));
    EXPECT_FALSE(binary);
    EXPECT_EQ(got, "hi");
    EXPECT_FALSE(broker::frame_payload(ws::encode_frame(ws::Opcode::ping, "hi"), got, binary));
}

TEST(BrokerEventIds, RisingAndUniqueAcrossThreadsAndNodes)
{
    boost::asio::io_context io;
    Broadcast<ws::Delivery> local;
    ferry::conf::WebsocketsConfig cfg;
    cfg.broker.driver = "redis";
    broker::Counters c1, c2;
    cfg.broker.node = "web-1";
    broker::RedisBroker one(io.get_executor(), local, cfg, c1);
    cfg.broker.node = "web-2";
    broker::RedisBroker two(io.get_executor(), local, cfg, c2);
    EXPECT_EQ(one.node(), "web-1");
    std::vector<std::uint64_t> ids[3];
    std::thread t([&] {
        for (int i = 0; i < 5000; ++i)
            ids[1].push_back(one.next_event_id());
    });
    for (int i = 0; i < 5000; ++i) {
        ids[0].push_back(one.next_event_id());
        ids[2].push_back(two.next_event_id());
    }
    t.join();
    EXPECT_TRUE(std::is_sorted(ids[0].begin(), ids[0].end()));
    EXPECT_TRUE(std::is_sorted(ids[2].begin(), ids[2].end()));
    std::set<std::uint64_t> all;
    for (auto &v : ids)
        all.insert(v.begin(), v.end());
    EXPECT_EQ(all.size(), 15000u) << "an id given twice";
    EXPECT_NE(ids[0].front() & 0x3ff, ids[2].front() & 0x3ff) << "these two names hash apart";
    EXPECT_GT(ids[0].front(), 1ull << 40) << "time-based: above any in-memory sequence a node restarted from";
    EXPECT_NE(broker::random_node_name(), broker::random_node_name());
}
