#include "ws/handshake.hpp"

#include "ws/actions.hpp"

#include <gtest/gtest.h>

using namespace ferry::server::detail;
using ferry::server::Request;

namespace {

Request upgrade(std::vector<std::pair<std::string, std::string>> extra = {})
{
    Request r;
    r.method = "GET";
    r.target = "/ws?room=1";
    r.headers = {{"Host", "x"},
                 {"Upgrade", "websocket"},
                 {"Connection", "keep-alive, Upgrade"},
                 {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                 {"Sec-WebSocket-Version", "13"}};
    for (auto &h : extra)
        r.headers.push_back(h);
    return r;
}

Request without(std::string_view name)
{
    Request r = upgrade();
    std::erase_if(r.headers, [&](const auto &h) { return h.first == name; });
    return r;
}

} // namespace

TEST(WsHandshake, AcceptKeyOfTheRfcExample)
{
    EXPECT_EQ(ws::accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WsHandshake, UpgradeIsRecognisedOnItsPathOnly)
{
    EXPECT_TRUE(ws::is_upgrade_for(upgrade(), "/ws"));
    EXPECT_FALSE(ws::is_upgrade_for(upgrade(), "/other"));
    Request r = upgrade();
    r.target = "http://example.com/ws?x";
    EXPECT_TRUE(ws::is_upgrade_for(r, "/ws"));
    r = upgrade();
    r.headers[1].second = "h2c";
    EXPECT_FALSE(ws::is_upgrade_for(r, "/ws"));
    r.headers[1].second = "foo, WebSocket";
    EXPECT_TRUE(ws::is_upgrade_for(r, "/ws"));
}

TEST(WsHandshake, ValidRequestPasses)
{
    EXPECT_EQ(ws::check_upgrade(upgrade(), "").status, 0);
}

TEST(WsHandshake, EveryFlawHasItsStatus)
{
    Request r = upgrade();
    r.method = "POST";
    EXPECT_EQ(ws::check_upgrade(r, "").status, 405);
    r = upgrade();
    r.version_minor = 0;
    EXPECT_EQ(ws::check_upgrade(r, "").status, 400);
    EXPECT_EQ(ws::check_upgrade(without("Connection"), "").status, 400);
    EXPECT_EQ(ws::check_upgrade(without("Sec-WebSocket-Key"), "").status, 400);
    auto v = ws::check_upgrade(without("Sec-WebSocket-Version"), "");
    EXPECT_EQ(v.status, 426);
    EXPECT_EQ(v.extra, "Sec-WebSocket-Version: 13\r\n");
    r = upgrade();
    r.headers[4].second = "8";
    EXPECT_EQ(ws::check_upgrade(r, "").status, 426);
    for (const char *bad :
         {"short", "dGhlIHNhbXBsZSBub25jZQ=", "dGhlIHNhbXBsZSBub25jZR==", "dGhlIHNhbXBsZSBub25j!Q=="}) {
        r = upgrade();
        r.headers[3].second = bad;
        EXPECT_EQ(ws::check_upgrade(r, "").status, 400) << bad;
    }
    r = upgrade({{"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}});
    EXPECT_EQ(ws::check_upgrade(r, "").status, 400) << "two keys";
    r = upgrade({{"Content-Length", "0"}});
    EXPECT_EQ(ws::check_upgrade(r, "").status, 400);
}

TEST(WsHandshake, OriginPattern)
{
    const char *pattern = "https://*.example.com";
    EXPECT_EQ(ws::check_upgrade(upgrade({{"Origin", "https://app.example.com"}}), pattern).status, 0);
    EXPECT_EQ(ws::check_upgrade(upgrade({{"Origin", "HTTPS://App.Example.com"}}), pattern).status, 0);
    EXPECT_EQ(ws::check_upgrade(upgrade({{"Origin", "https://example.com.evil.org"}}), pattern).status, 403);
    EXPECT_EQ(ws::check_upgrade(upgrade({{"Origin", "http://app.example.com"}}), pattern).status, 403);
    EXPECT_EQ(ws::check_upgrade(upgrade(), pattern).status, 0) << "no Origin: not a browser";
    EXPECT_EQ(ws::check_upgrade(upgrade({{"Origin", "https://evil.org"}}), "*").status, 0);
    EXPECT_TRUE(ws::origin_matches("*", ""));
    EXPECT_TRUE(ws::origin_matches("a*b*c", "aXXbYYc"));
    EXPECT_FALSE(ws::origin_matches("a*b*c", "aXXbYY"));
    EXPECT_TRUE(ws::origin_matches("**", "anything"));
}

TEST(WsHandshake, OfferedProtocols)
{
    Request r = upgrade({{"Sec-WebSocket-Protocol", "chat, v2.x"}, {"Sec-WebSocket-Protocol", "  third "}});
    EXPECT_EQ(ws::offered_protocols(r), (std::vector<std::string>{"chat", "v2.x", "third"}));
}

TEST(WsActions, EmptyBodyIsNoAction)
{
    auto a = ws::parse_actions("");
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->empty());
}

TEST(WsActions, PayloadsTakenInOrderAfterTheNul)
{
    std::string body =
        R"([{"do":"send","size":3},{"do":"publish","topics":["a","b"],"size":2,"binary":true,)"
        R"("exclude_self":true},{"do":"send","to":"1.2","text":"inline"},{"do":"join","topics":"t"},)"
        R"({"do":"leave","topics":["u"]},{"do":"close","code":4000,"reason":"r"},)"
        R"({"do":"data","value":"v"}])";
    body += '\0';
    body += std::string("abc\x00\xff", 5);
    auto a = ws::parse_actions(body);
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_EQ(a->size(), 7u);
    EXPECT_EQ((*a)[0].payload, "abc");
    EXPECT_EQ((*a)[1].payload, std::string("\x00\xff", 2));
    EXPECT_TRUE((*a)[1].binary);
    EXPECT_TRUE((*a)[1].exclude_self);
    EXPECT_EQ((*a)[1].targets, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ((*a)[2].payload, "inline");
    EXPECT_EQ((*a)[2].targets, (std::vector<std::string>{"1.2"}));
    EXPECT_EQ((*a)[3].targets, (std::vector<std::string>{"t"}));
    EXPECT_EQ((*a)[4].op, ws::Op::leave);
    EXPECT_EQ((*a)[5].code, 4000);
    EXPECT_EQ((*a)[5].reason, "r");
    EXPECT_EQ((*a)[6].value, "v");
}

TEST(WsActions, NoToIsThisConnectionAnEmptyToIsNobody)
{
    auto a = ws::parse_actions(R"([{"do":"send","text":"x"},{"do":"send","to":[],"text":"y"},{"do":"close"},)"
                               R"({"do":"close","to":[]}])");
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_TRUE((*a)[0].to_self);
    EXPECT_FALSE((*a)[1].to_self);
    EXPECT_TRUE((*a)[1].targets.empty());
    EXPECT_TRUE((*a)[2].to_self);
    EXPECT_FALSE((*a)[3].to_self);
}

TEST(WsActions, MalformedActionsAreNamed)
{
    auto err = [](std::string body) {
        auto a = ws::parse_actions(body);
        return a ? std::string("(accepted)") : a.error().message;
    };
    EXPECT_NE(err("{").find("not JSON"), std::string::npos);
    EXPECT_NE(err(R"({"do":"send"})").find("must be a JSON list"), std::string::npos);
    EXPECT_NE(err(R"([1])").find("action 0 is not an object"), std::string::npos);
    EXPECT_NE(err(R"([{"x":1}])").find("has no \"do\""), std::string::npos);
    EXPECT_NE(err(R"([{"do":"fly"}])").find("unknown \"do\""), std::string::npos);
    EXPECT_NE(err(R"([{"do":"send"}])").find("needs \"size\""), std::string::npos);
    EXPECT_NE(err(std::string(R"([{"do":"send","size":9}])") + '\0' + "abc").find("past the end"),
              std::string::npos);
    EXPECT_NE(err(std::string(R"([{"do":"send","size":1}])") + '\0' + "abc").find("not used"),
              std::string::npos);
    EXPECT_NE(err(R"([{"do":"publish","text":"x"}])").find("no \"topics\""), std::string::npos);
    EXPECT_NE(err(R"([{"do":"publish","topics":[1],"text":"x"}])").find("list of strings"),
              std::string::npos);
    EXPECT_NE(err(R"([{"do":"close","code":1005}])").find("close code"), std::string::npos);
    EXPECT_NE(err(R"([{"do":"close","code":999}])").find("close code"), std::string::npos);
    EXPECT_NE(err(R"([{"do":"data"}])").find("\"value\""), std::string::npos);
}
