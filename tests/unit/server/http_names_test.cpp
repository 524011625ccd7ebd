#include "ferry/server/http_grammar.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ferry/base/text.hpp"

namespace server = ferry::server;

// ---- canonical names and cookies ----

TEST(CanonicalHeaderName, Table)
{
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"content-type", "Content-Type"},
        {"CONTENT-TYPE", "Content-Type"},
        {"Content-Type", "Content-Type"},
        {"x-forwarded-for", "X-Forwarded-For"},
        {"accept", "Accept"},
        {"a", "A"},
        {"", ""},
        {"-", "-"},
        {"x--y", "X--Y"},
        {"-foo", "-Foo"},
        {"foo-", "Foo-"},
        {"www-authenticate", "Www-Authenticate"},
        {"x-b3-traceid", "X-B3-Traceid"},
        {"1abc-2def", "1abc-2def"},
        {"user_agent", "User_agent"},
        {"x.y-z", "X.y-Z"},
        {"foo bar", "foo bar"}, // space: unchanged
        {"content type", "content type"},
        {"foo:bar", "foo:bar"}, // not a token char
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"x\ty", "x\ty"},
        {"!#$%&'*+.^_`|~-abc", "!#$%&'*+.^_`|~-Abc"},
    };
    for (const auto &[in, want] : cases)
        EXPECT_EQ(server::canonical_header_name(in), want) << ferry::printable(in);
}

TEST(ParseCookies, Table)
{
    using Pairs = std::vector<std::pair<std::string, std::string>>;
    const std::vector<std::pair<std::string, Pairs>> cases = {
        {"", {}},
        {"a=1", {{"a", "1"}}},
        {"a=1; b=2", {{"a", "1"}, {"b", "2"}}},
        {"a=1;b=2;;  c=3 ;", {{"a", "1"}, {"b", "2"}, {"c", "3"}}},
        {" \ta=1\t ", {{"a", "1"}}},
        {"a=", {{"a", ""}}},
        {"flag", {{"flag", ""}}},
        {"=nameless; b=2", {{"b", "2"}}},
        {"a=1; a=2", {{"a", "1"}}}, // first wins
        {"a=x=y", {{"a", "x=y"}}},
        {"enc=hello%20world%21", {{"enc", "hello world!"}}},
        {"plus=a+b", {{"plus", "a b"}}}, // '+' is a space, as RoadRunner and PHP-FPM
        {"pct=%41%4a%4A", {{"pct", "AJJ"}}},
        {"bad=%zz%4%", {{"bad", "%zz%4%"}}}, // malformed escapes kept
        {"tail=ab%4", {{"tail", "ab%4"}}},
        {"nul=a%00b", {{"nul", std::string("a\0b", 3)}}},
        {"utf=%C3%A9", {{"utf", "\xc3\xa9"}}},
        {"q=\"quoted value\"", {{"q", "quoted value"}}},
        {"q=\"", {{"q", "\""}}},
        {"sp = v ", {{"sp", "v"}}},
        {"b64=YWJj+/=", {{"b64", "YWJj /="}}},
    };
    for (const auto &[in, want] : cases) {
        Pairs out;
        server::parse_cookies(in, out);
        EXPECT_EQ(out, want) << in;
    }
}

TEST(ParseCookies, AppendsAndKeepsFirstAcrossCalls)
{
    std::vector<std::pair<std::string, std::string>> out;
    server::parse_cookies("a=1; b=2", out);
    server::parse_cookies("b=3; c=4", out);
    EXPECT_EQ(out, (std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "2"}, {"c", "4"}}));
}

TEST(ParseCookies, ManyCookiesStayUniqueAndFast)
{
    std::string header;
    for (int i = 0; i < 5000; ++i)
        header += "c" + std::to_string(i % 2500) + "=" + std::to_string(i) + "; ";
    std::vector<std::pair<std::string, std::string>> out;
    server::parse_cookies(header, out);
    ASSERT_EQ(out.size(), 2500u);
    for (int i = 0; i < 2500; ++i) {
        EXPECT_EQ(out[static_cast<std::size_t>(i)].first, "c" + std::to_string(i));
        EXPECT_EQ(out[static_cast<std::size_t>(i)].second, std::to_string(i)); // the first one
    }
}

TEST(Tokens, IsTokenAndIequals)
{
    using ferry::server::iequals;
    using ferry::server::is_token;
    EXPECT_TRUE(is_token("Content-Type"));
    EXPECT_TRUE(is_token("x!#$%&'*+-.^_`|~9"));
    EXPECT_FALSE(is_token(""));
    EXPECT_FALSE(is_token("Bad Name"));
    EXPECT_FALSE(is_token("a:b"));
    EXPECT_FALSE(is_token(std::string_view("a\0b", 3)));
    EXPECT_TRUE(iequals("Content-Length", "content-LENGTH"));
    EXPECT_FALSE(iequals("Content-Length", "Content-Lengt"));
    EXPECT_FALSE(iequals("a[", "A{")); // only ASCII letters fold
}
