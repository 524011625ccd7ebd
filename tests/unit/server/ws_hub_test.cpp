// The Hub's topic bookkeeping under churn: joins, leaves and removals in random order keep every
// membership and member slot pointing at each other (swap-remove), counts right, and deliveries reaching
// exactly the subscribers, once each. Real WsConn objects over loopback sockets; the pool is never started.
#include "ws/hub.hpp"

#include "ferry/conf/config.hpp"
#include "handlers/handler.hpp"
#include "shared_state.hpp"
#include "ws/connection.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include <boost/asio/ip/tcp.hpp>

#include <map>
#include <random>
#include <set>

using namespace ferry::server::detail;
namespace asio = boost::asio;

namespace {

struct NoPublisher final : ws::Publisher {
    void publish(ws::SharedDelivery) override {}
};

struct Fixture {
    asio::io_context io;
    ferry::conf::Config cfg;
    ferry::Budget budget{1 << 20};
    Router router;
    ServerCounters counters;
    SharedState st{io, cfg, budget, router, counters};
    ferry::pool::Pool pool{std::make_shared<ferry::pool::Host>(), io, ferry::pool::Options{}};
    NoPublisher publisher;
    ws::WsBudgets budgets{cfg.websockets};
    ws::WsLoop loop{st, cfg.websockets, pool, publisher, budgets};
    tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
    std::vector<tcp::socket> peers; // the client ends, kept open

    std::shared_ptr<ws::WsConn> connection(std::uint64_t id)
    {
        tcp::socket client(io);
        client.connect(acceptor.local_endpoint());
        tcp::socket server = acceptor.accept();
        peers.push_back(std::move(client));
        StreamSocket s(io);
        s.assign(tcp::v4(), server.release());
        return ws::WsConn::make(loop, Stream(std::move(s)), id, "127.0.0.1");
    }
};

void check_consistent(ws::Hub &hub, const std::vector<std::shared_ptr<ws::WsConn>> &conns,
                      const std::map<std::string, std::set<ws::WsConn *>> &want)
{
    for (const auto &c : conns)
        for (std::size_t i = 0; i < c->memberships().size(); ++i) {
            const auto &m = c->memberships()[i];
            ASSERT_LT(m.slot, m.topic->members.size());
            ASSERT_EQ(m.topic->members[m.slot].conn, c.get());
            ASSERT_EQ(m.topic->members[m.slot].membership, i);
        }
    std::size_t live = 0;
    for (const auto &[topic, members] : want) {
        ASSERT_EQ(hub.subscribers(topic), members.size()) << topic;
        live += members.empty() ? 0 : 1;
    }
    ASSERT_EQ(hub.topics(), live) << "an empty topic is dropped";
}

} // namespace

TEST(WsHub, ChurnKeepsMembershipsAndSlotsConsistent)
{
    Fixture f;
    ws::Hub &hub = f.loop.hub;
    std::vector<std::shared_ptr<ws::WsConn>> conns;
    for (std::uint64_t i = 1; i <= 40; ++i)
        conns.push_back(f.connection((std::uint64_t(1) << 40) | i));
    ASSERT_EQ(hub.connections(), 40u);
    const std::vector<std::string> topics{"a", "b", "c", "d", "e", "f"};
    std::map<std::string, std::set<ws::WsConn *>> want;
    std::mt19937 rng(7);
    for (int step = 0; step < 3000; ++step) {
        auto &c = conns[rng() % conns.size()];
        const std::string &t = topics[rng() % topics.size()];
        if (rng() % 2) {
            hub.join(c.get(), t);
            hub.join(c.get(), t); // twice: still once
            want[t].insert(c.get());
        } else {
            hub.leave(c.get(), t);
            want[t].erase(c.get());
        }
        if (step % 100 == 0)
            check_consistent(hub, conns, want);
    }
    check_consistent(hub, conns, want);
    // Removing connections (as their end does) takes them out of every topic.
    for (std::size_t i = 0; i < conns.size(); i += 3) {
        hub.remove(conns[i].get());
        for (auto &[t, members] : want)
            members.erase(conns[i].get());
        EXPECT_TRUE(conns[i]->memberships().empty());
        EXPECT_EQ(hub.find(conns[i]->id()), nullptr);
    }
    std::vector<std::shared_ptr<ws::WsConn>> left;
    for (std::size_t i = 0; i < conns.size(); ++i)
        if (i % 3 != 0)
            left.push_back(conns[i]);
    check_consistent(hub, left, want);
    EXPECT_EQ(hub.connections(), left.size());
    for (const auto &c : left)
        EXPECT_EQ(hub.find(c->id()), c.get());
}

TEST(WsHub, APublishToSeveralTopicsReachesEachSubscriberOnce)
{
    Fixture f;
    ws::Hub &hub = f.loop.hub;
    auto a = f.connection((std::uint64_t(1) << 40) | 1);
    auto b = f.connection((std::uint64_t(1) << 40) | 2);
    auto c = f.connection((std::uint64_t(1) << 40) | 3);
    hub.join(a.get(), "x");
    hub.join(a.get(), "y");
    hub.join(b.get(), "y");
    ws::Delivery d;
    d.kind = ws::Delivery::Kind::publish;
    d.topics = {"x", "y", "z"};
    d.frame = ws::make_frame(ws::Opcode::text, "hi");
    hub.deliver(d);
    EXPECT_EQ(hub.stats().delivered, 2u) << "a once (in x and y), b once, c not at all";
    d.exclude = b->id();
    hub.deliver(d);
    EXPECT_EQ(hub.stats().delivered, 3u) << "exclude: not to b";
    ws::Delivery s;
    s.kind = ws::Delivery::Kind::send;
    s.ids = {c->id(), (std::uint64_t(2) << 40) | 9};
    s.frame = d.frame;
    hub.deliver(s);
    EXPECT_EQ(hub.stats().delivered, 4u) << "a send reaches the id on this loop; the other is not here";
    // What reached the sockets: a got "hi" twice, b once, c once (2 + 2 bytes each frame).
    f.io.poll();
    for (auto *p : {&f.peers[0], &f.peers[1], &f.peers[2]}) {
        p->non_blocking(true);
    }
    auto bytes_of = [](tcp::socket &sock) {
        char buf[64];
        boost::system::error_code ec;
        std::size_t n = sock.read_some(asio::buffer(buf), ec);
        return ec ? std::size_t(0) : n;
    };
    EXPECT_EQ(bytes_of(f.peers[0]), 8u);
    EXPECT_EQ(bytes_of(f.peers[1]), 4u);
    EXPECT_EQ(bytes_of(f.peers[2]), 4u);
}

TEST(WsHub, SseHistoryIsBoundedInEventsAndBytesPerTopic)
{
    Fixture f;
    ws::Hub &hub = f.loop.hub;
    const std::string payload(100, 'p');
    const std::size_t event_size = ws::encode_sse_chunk(1, payload).size();
    hub.keep_history(3, 2 * event_size + event_size / 2); // room for 2 events by bytes, 3 by count
    NoPublisher ids_from;                                 // the event ids' sequence
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 5; ++i) {
        ws::Delivery d;
        d.kind = ws::Delivery::Kind::publish;
        d.topics = {"t"};
        d.frame = ws::make_frame(ws::Opcode::text, payload);
        ws::prepare_sse(d, payload, false, &ids_from);
        ids.push_back(d.event_id);
        hub.deliver(d);
    }
    auto kept = hub.history({"t"}, 0);
    ASSERT_EQ(kept.size(), 2u) << "the byte bound, below the count bound";
    EXPECT_NE(kept[0].sse->find("id: " + std::to_string(ids[3]) + "\n"), std::string::npos)
        << "the newest two";
    EXPECT_NE(kept[1].sse->find("id: " + std::to_string(ids[4]) + "\n"), std::string::npos);
    EXPECT_LE(hub.history_bytes(), 2 * event_size + event_size / 2);
    EXPECT_EQ(hub.history({"t"}, ids[3]).size(), 1u) << "after an id: only what came later";
    // Binary messages have no SSE form and are not kept.
    ws::Delivery b;
    b.kind = ws::Delivery::Kind::publish;
    b.topics = {"t"};
    b.frame = ws::make_frame(ws::Opcode::binary, "x");
    ws::prepare_sse(b, "x", true, &ids_from);
    EXPECT_FALSE(b.sse);
    EXPECT_EQ(b.event_id, 0u);
    EXPECT_EQ(ids_from.next_event_id(), ids.back() + 1) << "a binary message takes no id";
    hub.deliver(b);
    EXPECT_EQ(hub.history({"t"}, 0).size(), 2u);
}

TEST(WsHub, SseEventsSplitLinesAndCarryTheirId)
{
    EXPECT_EQ(ws::encode_sse_chunk(7, "a\nb\r\nc\rd"),
              "27\r\nid: 7\ndata: a\ndata: b\ndata: c\ndata: d\n\n\r\n");
    EXPECT_EQ(ws::encode_sse_chunk(0, ""), "8\r\ndata: \n\n\r\n");
}

// SSE event ids are the publisher's sequence (one per server, or per broker later), not the process's: two
// publishers count apart, each from 1, and ids from one publisher used on several threads never repeat.
TEST(WsHub, EventIdsAreThePublishersSequence)
{
    NoPublisher a, b;
    EXPECT_EQ(a.next_event_id(), 1u);
    EXPECT_EQ(a.next_event_id(), 2u);
    EXPECT_EQ(b.next_event_id(), 1u) << "another server's publisher";
    std::vector<std::uint64_t> seen[2];
    std::thread t([&] {
        for (int i = 0; i < 1000; ++i)
            seen[1].push_back(a.next_event_id());
    });
    for (int i = 0; i < 1000; ++i)
        seen[0].push_back(a.next_event_id());
    t.join();
    std::vector<std::uint64_t> all(seen[0]);
    all.insert(all.end(), seen[1].begin(), seen[1].end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "an id given twice";
    EXPECT_EQ(all.front(), 3u);
    EXPECT_EQ(all.back(), 2002u);
}

// Another node's copy of a message to topics {x, y} comes once per topic (broker/): the copy for y skips the
// members of x, who had x's copy; the hub tells a broker when a topic gets its first member and loses its
// last.
TEST(WsHub, AnotherNodesCopyIsForItsTopicAlone)
{
    Fixture f;
    ws::Hub &hub = f.loop.hub;
    auto a = f.connection((std::uint64_t(1) << 40) | 1);
    auto b = f.connection((std::uint64_t(1) << 40) | 2);
    hub.join(a.get(), "x");
    hub.join(a.get(), "y");
    hub.join(b.get(), "y");
    ws::Delivery d;
    d.kind = ws::Delivery::Kind::publish;
    d.topics = {"x", "y"};
    d.frame = ws::make_frame(ws::Opcode::text, "hi");
    d.only_topic = 0;
    hub.deliver(d);
    EXPECT_EQ(hub.stats().delivered, 1u) << "x's copy: a only";
    d.only_topic = 1;
    hub.deliver(d);
    EXPECT_EQ(hub.stats().delivered, 2u) << "y's copy: b only (a had x's)";
    d.only_topic = 2;
    hub.deliver(d);
    EXPECT_EQ(hub.stats().delivered, 2u) << "an index out of the list: nothing";
}

TEST(WsHub, ABrokerIsToldOfFirstAndLastMembers)
{
    struct Recorder final : ws::Publisher {
        void publish(ws::SharedDelivery) override {}
        void interest(const std::string &topic, bool joined) override
        {
            calls.push_back((joined ? "+" : "-") + topic);
        }
        std::vector<std::string> calls;
    } rec;
    Fixture f;
    ws::Hub &hub = f.loop.hub;
    hub.watch(&rec);
    auto a = f.connection((std::uint64_t(1) << 40) | 1);
    auto b = f.connection((std::uint64_t(1) << 40) | 2);
    hub.add(a.get());
    hub.add(b.get());
    hub.join(a.get(), "t");
    hub.join(b.get(), "t");
    hub.join(a.get(), "t"); // again: nothing
    hub.join(a.get(), "u");
    hub.leave(a.get(), "t");
    EXPECT_EQ(rec.calls, (std::vector<std::string>{"+t", "+u"}));
    hub.remove(b.get()); // leaves t: its last member
    hub.remove(a.get()); // leaves u
    EXPECT_EQ(rec.calls, (std::vector<std::string>{"+t", "+u", "-t", "-u"}));
}
