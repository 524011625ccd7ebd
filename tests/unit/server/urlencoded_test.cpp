#include "forms/urlencoded.hpp"

#include <gtest/gtest.h>

#include <string>

using ferry::relay::Codec;
using ferry::relay::FormTree;
using ferry::server::detail::is_urlencoded;
using ferry::server::detail::parse_urlencoded;

namespace {
std::string parsed(std::string_view body)
{
    FormTree f;
    EXPECT_TRUE(parse_urlencoded(body, f).has_value()) << body;
    std::string out;
    encode_form(f, Codec::json, out);
    return out;
}
} // namespace

TEST(Urlencoded, DecodesAndSplitsLikePhp)
{
    EXPECT_EQ(parsed("a=1&b[]=2&b[]=3"), R"({"a":"1","b":["2","3"]})");
    EXPECT_EQ(parsed("a%5Bx%5D=1+2&c=%41%zz%4"), R"({"a":{"x":"1 2"},"c":"A%zz%4"})");
    EXPECT_EQ(parsed("&&a&=x&b=="), R"({"a":"","b":"="})") << "empty pairs and names skipped";
    EXPECT_EQ(parsed(""), "{}");
    EXPECT_EQ(parsed("n%00ul=v%00"), std::string(R"({"n)") + "\\u0000" + R"(ul":"v)" + "\\u0000" + R"("})");
    EXPECT_EQ(parsed("a=%&b=%%41+&c=plain+%2Bx%"), R"({"a":"%","b":"%A ","c":"plain +x%"})")
        << "malformed escapes kept as PHP keeps them, between and after runs";
}

TEST(Urlencoded, TheFormsLimitsFailTheParse)
{
    ferry::relay::FormLimits l;
    l.max_fields = 2;
    FormTree f(l);
    auto r = parse_urlencoded("a=1&b=2&c=3", f);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("max_fields"), std::string::npos);
}

TEST(Urlencoded, ContentType)
{
    EXPECT_TRUE(is_urlencoded("application/x-www-form-urlencoded"));
    EXPECT_TRUE(is_urlencoded(" Application/X-WWW-Form-Urlencoded ; charset=UTF-8"));
    EXPECT_FALSE(is_urlencoded("application/x-www-form-urlencodedx"));
    EXPECT_FALSE(is_urlencoded("multipart/form-data; boundary=x"));
    EXPECT_FALSE(is_urlencoded(""));
}
