#include "ferry/relay/form.hpp"

#include <gtest/gtest.h>

#include <msgpack.hpp>

#include <string>

using ferry::relay::Codec;
using ferry::relay::encode_form;
using ferry::relay::FormLimits;
using ferry::relay::FormTree;

namespace {

std::string json(const FormTree &f)
{
    std::string out;
    encode_form(f, Codec::json, out);
    return out;
}

FormTree form(std::initializer_list<std::pair<const char *, const char *>> fields, FormLimits limits = {})
{
    FormTree f(limits);
    for (auto [n, v] : fields)
        EXPECT_TRUE(f.add(n, v).has_value()) << n;
    return f;
}

} // namespace

// What PHP puts in $_POST for the same fields (checked with php -r 'parse_str(...)').
TEST(Form, PhpNamingRules)
{
    EXPECT_EQ(json(form({})), "{}");
    EXPECT_EQ(json(form({{"a", "1"}, {"b", "2"}})), R"({"a":"1","b":"2"})");
    EXPECT_EQ(json(form({{"a", "1"}, {"a", "2"}})), R"({"a":"2"})") << "the last value wins";
    EXPECT_EQ(json(form({{"b[]", "2"}, {"b[]", "3"}})), R"({"b":["2","3"]})");
    EXPECT_EQ(json(form({{"a[b][c]", "1"}, {"a[b][d]", "2"}})), R"({"a":{"b":{"c":"1","d":"2"}}})");
    EXPECT_EQ(json(form({{"a[][x]", "1"}, {"a[][x]", "2"}})), R"({"a":[{"x":"1"},{"x":"2"}]})");
    EXPECT_EQ(json(form({{"a[5]", "x"}, {"a[]", "y"}})), R"({"a":{"5":"x","6":"y"}})");
    EXPECT_EQ(json(form({{"a[0]", "x"}, {"a[1]", "y"}})), R"({"a":["x","y"]})");
    EXPECT_EQ(json(form({{"a[05]", "x"}, {"a[]", "y"}})), R"({"a":{"05":"x","0":"y"}})")
        << "05 is a string key";
    EXPECT_EQ(json(form({{"a.b c", "1"}})), R"({"a_b_c":"1"})");
    EXPECT_EQ(json(form({{"a.b[c.d]", "1"}})), R"({"a_b":{"c.d":"1"}})") << "only the base name is changed";
    EXPECT_EQ(json(form({{"a[b", "1"}})), R"({"a_b":"1"})") << "an unclosed bracket";
    EXPECT_EQ(json(form({{"a[x]junk[y]", "1"}})), R"({"a":{"x":"1"}})") << "after ] only [ continues";
    EXPECT_EQ(json(form({{"  a", "1"}})), R"({"a":"1"})");
    EXPECT_EQ(json(form({{"[x]", "1"}, {"", "2"}})), "{}") << "an empty base name is dropped";
    EXPECT_EQ(json(form({{"a", "1"}, {"a[]", "2"}})), R"({"a":["2"]})") << "a leaf becomes an array";
    EXPECT_EQ(json(form({{"a[]", "1"}, {"a", "2"}})), R"({"a":"2"})");
    EXPECT_EQ(json(form({{"a[ ]", "1"}, {"a[ x]", "2"}})), R"({"a":{"0":"1"," x":"2"}})");
    EXPECT_EQ(json(form({{"q", "\"\\\n\xff"}})), R"({"q":"\"\\\n\ufffd"})") << "JSON-escaped";
}

// The append index at the ends of int64 (issue 41: `next_index++` past INT64_MAX was signed overflow). Each
// expected tree is what PHP 8.2 prints for the same query:
//     php -r 'parse_str($argv[1], $r); echo json_encode($r), "\n";' 'a[9223372036854775807]=x&a[]=y'
TEST(Form, AppendIndexAtTheEndsOfInt64AsPhp)
{
    // INT64_MAX taken: an append has no key left and is dropped, the rest of the form kept.
    EXPECT_EQ(json(form({{"a[9223372036854775807]", "x"}, {"a[]", "y"}})),
              R"({"a":{"9223372036854775807":"x"}})");
    EXPECT_EQ(json(form({{"a[9223372036854775806]", "x"}, {"a[]", "y"}, {"a[]", "z"}})),
              R"({"a":{"9223372036854775806":"x","9223372036854775807":"y"}})");
    EXPECT_EQ(json(form({{"a[9223372036854775807]", "x"}, {"a[][k]", "y"}, {"b", "1"}})),
              R"({"a":{"9223372036854775807":"x"},"b":"1"})");
    EXPECT_EQ(json(form({{"a[9223372036854775807]", "x"}, {"a[]", "y"}, {"a[3]", "z"}, {"a[]", "w"}})),
              R"({"a":{"9223372036854775807":"x","3":"z"}})");
    // Beyond int64 the key is a string and leaves the index alone.
    EXPECT_EQ(json(form({{"a[9223372036854775808]", "x"}, {"a[]", "y"}})),
              R"({"a":{"9223372036854775808":"x","0":"y"}})");
    // Negative keys: the next append is one past the largest, as PHP's nNextFreeElement.
    EXPECT_EQ(json(form({{"a[-5]", "x"}, {"a[]", "y"}})), R"({"a":{"-5":"x","-4":"y"}})");
    EXPECT_EQ(json(form({{"a[-9223372036854775808]", "x"}, {"a[]", "y"}})),
              R"({"a":{"-9223372036854775808":"x","-9223372036854775807":"y"}})");
    EXPECT_EQ(json(form({{"a[x]", "1"}, {"a[]", "2"}})), R"({"a":{"x":"1","0":"2"}})");
}

TEST(Form, LimitsAreErrorsNamingTheLimit)
{
    FormLimits l;
    l.max_fields = 3;
    l.max_depth = 2;
    FormTree f(l);
    EXPECT_TRUE(f.add("a[b][c]", "1").has_value());
    auto deep = f.add("a[b][c][d]", "1");
    ASSERT_FALSE(deep);
    EXPECT_NE(deep.error().message.find("max_depth"), std::string::npos) << deep.error().message;
    EXPECT_TRUE(f.add("x", "1").has_value());
    auto many = f.add("y", "1");
    ASSERT_FALSE(many);
    EXPECT_NE(many.error().message.find("max_fields"), std::string::npos) << many.error().message;
    f.clear();
    EXPECT_TRUE(f.empty());
    EXPECT_TRUE(f.add("y", "1").has_value());
}

TEST(Form, MsgpackHasTheSameTree)
{
    FormTree f = form({{"a", "1"}, {"b[]", "2"}, {"b[]", "3"}, {"c[k][]", "4"}});
    std::string out;
    encode_form(f, Codec::msgpack, out);
    msgpack::object_handle oh = msgpack::unpack(out.data(), out.size());
    std::ostringstream shown;
    shown << oh.get();
    EXPECT_EQ(shown.str(), R"({"a":"1","b":["2","3"],"c":{"k":["4"]}})");
    out.clear();
    encode_form(FormTree{}, Codec::msgpack, out);
    EXPECT_EQ(out, "\x80") << "an empty form is an empty map";
}
