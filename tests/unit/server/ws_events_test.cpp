// What a websockets worker is asked (ws/events.hpp, docs/protocol.md §9): the open event's attributes for a
// WebSocket and for an event stream (its topics and Last-Event-ID), a message and a close event's context
// and body, connection ids both ways (and what is not one).
#include "ws/events.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

using namespace ferry::server::detail::ws;
using ferry::relay::RequestContext;

namespace {

std::map<std::string, std::string> attributes(const RequestContext &ctx)
{
    std::map<std::string, std::string> m;
    for (const auto &[k, v] : ctx.attributes)
        m[k] = v;
    return m;
}

constexpr std::uint64_t id_1_42 = (std::uint64_t(1) << 40) | 42;

} // namespace

TEST(WsEvents, AWebSocketsOpenEventSaysWhichConnection)
{
    RequestContext ctx;
    ctx.attributes = {{"stale", "x"}};
    EXPECT_EQ(add_open_event(ctx, id_1_42, {}, false, "/ws?topic=a", "7"), 0u) << "not an event stream";
    const auto a = attributes(ctx);
    EXPECT_EQ(a, (std::map<std::string, std::string>{{"ferry.ws.event", "open"}, {"ferry.ws.id", "1.42"}}));
}

TEST(WsEvents, AnEventStreamsOpenEventCarriesItsTopicsAndLastEventId)
{
    RequestContext ctx;
    EXPECT_EQ(add_open_event(ctx, id_1_42, "web-1", true, "/events?topic=a&topic=b%20c&x=1", "17"), 17u);
    auto a = attributes(ctx);
    EXPECT_EQ(a["ferry.ws.transport"], "sse");
    EXPECT_EQ(a["ferry.ws.id"], "web-1.1.42") << "with a broker: the node's name first";
    EXPECT_EQ(a["ferry.sse.topics"], R"(["a","b c"])");
    EXPECT_EQ(a["ferry.sse.last_event_id"], "17");
    RequestContext fresh;
    EXPECT_EQ(add_open_event(fresh, id_1_42, {}, true, "/events", "not a number"), 0u);
    EXPECT_EQ(attributes(fresh)["ferry.sse.topics"], "[]");
}

TEST(WsEvents, AMessageEventIsAPostWithTheMessageAsItsBody)
{
    PhpEvent e;
    e.binary = true;
    e.payload = std::string("\x00\x01", 2);
    RequestContext ctx;
    event_context(ctx, e, id_1_42, {}, "user=7", false, "203.0.113.9", "http://host/ws");
    EXPECT_EQ(ctx.method, "POST");
    EXPECT_EQ(ctx.uri, "http://host/ws");
    EXPECT_EQ(ctx.remote_addr, "203.0.113.9");
    auto a = attributes(ctx);
    EXPECT_EQ(a["ferry.ws.event"], "message");
    EXPECT_EQ(a["ferry.ws.id"], "1.42");
    EXPECT_EQ(a["ferry.ws.data"], "user=7");
    EXPECT_EQ(a["ferry.ws.type"], "binary");
    EXPECT_EQ(a.count("ferry.ws.transport"), 0u);
    auto body = event_body(e);
    EXPECT_EQ(body.memory, e.payload);
    EXPECT_EQ(body.size, 2u);
}

TEST(WsEvents, ACloseEventHasItsCodeAndReasonAndNoBody)
{
    PhpEvent e;
    e.close = true;
    e.code = 1001;
    e.payload = "going away";
    RequestContext ctx;
    event_context(ctx, e, id_1_42, "web-1", "", true, "::1", "http://host/events");
    auto a = attributes(ctx);
    EXPECT_EQ(a["ferry.ws.event"], "close");
    EXPECT_EQ(a["ferry.ws.id"], "web-1.1.42");
    EXPECT_EQ(a["ferry.ws.code"], "1001");
    EXPECT_EQ(a["ferry.ws.reason"], "going away");
    EXPECT_EQ(a["ferry.ws.transport"], "sse");
    EXPECT_EQ(event_body(e).size, 0u);
}

TEST(WsEvents, ConnectionIdsBothWays)
{
    EXPECT_EQ(format_id(id_1_42), "1.42");
    EXPECT_EQ(parse_id("1.42"), id_1_42);
    for (const char *bad :
         {"", "1", "0.5", "x.1", "1.x", "1.2.3", "1.", ".1", "1048576.1", "1.1099511627776"})
        EXPECT_EQ(parse_id(bad), 0u) << bad;
    // With a broker the node's name comes first; a target may name this node or another.
    EXPECT_EQ(format_id(id_1_42, "web-1"), "web-1.1.42");
    Target t = parse_target("web-1.1.42");
    EXPECT_EQ(t.node, "web-1");
    EXPECT_EQ(t.id, id_1_42);
    EXPECT_TRUE(t.here("web-1"));
    EXPECT_FALSE(t.here("web-2"));
    t = parse_target("1.42");
    EXPECT_EQ(t.id, id_1_42);
    EXPECT_TRUE(t.here("web-2")) << "no node: this one";
    for (const char *bad : {"", ".1.42", "web-1.1", "web-1.x.1", "a.b.1.42", "web-1.1.42.", "web-1..42"})
        EXPECT_EQ(parse_target(bad).id, 0u) << bad;
}
