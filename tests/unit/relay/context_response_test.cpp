#include "ferry/relay/context.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <msgpack.hpp>

#include <climits>
#include <map>
#include <string>
#include <vector>

#include "ferry/relay/frame.hpp"

namespace relay = ferry::relay;
namespace json = boost::json;
using relay::Codec;
using relay::RequestContext;
using relay::ResponseContext;

namespace {

// ---- msgpack builders for response tests ----

struct Mp {
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk{buf};
    Mp &map(std::uint32_t n) { return pk.pack_map(n), *this; }
    Mp &arr(std::uint32_t n) { return pk.pack_array(n), *this; }
    Mp &str(std::string_view s)
    {
        pk.pack_str(static_cast<std::uint32_t>(s.size()));
        pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
        return *this;
    }
    Mp &bin(std::string_view s)
    {
        pk.pack_bin(static_cast<std::uint32_t>(s.size()));
        pk.pack_bin_body(s.data(), static_cast<std::uint32_t>(s.size()));
        return *this;
    }
    template <class T> Mp &val(const T &v) { return pk.pack(v), *this; }
    Mp &nil() { return pk.pack_nil(), *this; }
    std::string bytes() const { return std::string(buf.data(), buf.size()); }
};

bool decode(std::string_view in, Codec codec, ResponseContext &r, std::string &err)
{
    r.status = -7;
    r.headers = {{"Stale", {"x"}}}; // decode_response must reset its output
    err.clear();
    auto decoded = relay::decode_response(in, codec, r);
    if (!decoded)
        err = decoded.error().message;
    return decoded.has_value();
}

std::vector<std::pair<std::string, std::vector<std::string>>> flat(const ResponseContext &r)
{
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (const auto &h : r.headers)
        out.emplace_back(h.name, h.values);
    return out;
}

using Flat = std::vector<std::pair<std::string, std::vector<std::string>>>;

} // namespace
// ---- decode_response, JSON ----

TEST(ResponseJson, Valid)
{
    ResponseContext r;
    std::string err;
    ASSERT_TRUE(
        decode(R"({"status":404,"headers":{"Content-Type":["text/plain"],"Set-Cookie":["a=1","b=2"]}})",
               Codec::json, r, err))
        << err;
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(flat(r), (Flat{{"Content-Type", {"text/plain"}}, {"Set-Cookie", {"a=1", "b=2"}}}));
    EXPECT_TRUE(err.empty());
}

TEST(ResponseJson, EmptyAndMissingFieldsMean200)
{
    ResponseContext r;
    std::string err;
    for (std::string_view in : {"", "{}", "[]", R"({"headers":{}})", R"({"status":null,"headers":null})",
                                R"({"headers":[]})", " { } ", R"({"status":200,"body":"ignored"})"}) {
        SCOPED_TRACE(in);
        ASSERT_TRUE(decode(in, Codec::json, r, err)) << err;
        EXPECT_EQ(r.status, 200);
        EXPECT_TRUE(r.headers.empty());
    }
}

TEST(ResponseJson, OddButAcceptedInputs)
{
    struct Case {
        std::string in;
        int status;
        Flat headers;
    };
    const std::vector<Case> cases = {
        {R"({"status":"404"})", 404, {}},
        {R"({"status":201.0})", 201, {}},
        {R"({"status":1000})", 1000, {}},
        {R"({"status":-5})", -5, {}},
        {R"({"status":99999999999})", INT_MAX, {}},
        {R"({"status":"-99999999999"})", INT_MIN, {}},
        {R"({"status":1e30})", INT_MAX, {}},
        {R"({"headers":{"X":"single"}})", 200, {{"X", {"single"}}}},
        {R"({"headers":{"X":5,"Y":[1,-2,2.5,"s",true,false]}})",
         200,
         {{"X", {"5"}}, {"Y", {"1", "-2", "2.5", "s", "1", ""}}}},
        {R"({"headers":{"X":null,"Y":[],"Z":["a",null,"b"]}})", 200, {{"Z", {"a", "b"}}}},
        {R"({"headers":{"X":{"0":"a","2":"b"}}})", 200, {{"X", {"a", "b"}}}},
        {R"({"headers":{"":["dropped"],"K":[""]}})", 200, {{"K", {""}}}},
        {R"({"headers":{"X-Utf8":["caf\u00e9 \"q\""]}})", 200, {{"X-Utf8", {"caf\xc3\xa9 \"q\""}}}},
        {R"({"headers":{"lower-case":["kept as sent"]}})", 200, {{"lower-case", {"kept as sent"}}}},
    };
    for (const auto &tc : cases) {
        SCOPED_TRACE(tc.in);
        ResponseContext r;
        std::string err;
        ASSERT_TRUE(decode(tc.in, Codec::json, r, err)) << err;
        EXPECT_EQ(r.status, tc.status);
        EXPECT_EQ(flat(r), tc.headers);
    }
}

TEST(ResponseJson, InvalidInputsFailWithAnError)
{
    struct Case {
        std::string in;
        std::string error_part;
    };
    const std::vector<Case> cases = {
        {"not json", "not valid JSON"},
        {"{\"status\":200", "not valid JSON"},
        {"{\"status\":200}}", "not valid JSON"},
        {"{\"status\":200} x", "not valid JSON"},
        {"   ", "not valid JSON"},
        {"\x13\x00garbage", "not valid JSON"},
        {"[1]", "not a JSON object"},
        {"42", "not a JSON object"},
        {"\"str\"", "not a JSON object"},
        {"null", "not a JSON object"},
        {R"({"status":"abc"})", "status is not an integer"},
        {R"({"status":"")", "not valid JSON"},
        {R"({"status":""})", "status is not an integer"},
        {R"({"status":"4 04"})", "status is not an integer"},
        {R"({"status":1.5})", "status is not an integer"},
        {R"({"status":true})", "status is not an integer"},
        {R"({"status":[200]})", "status is not an integer"},
        {R"({"status":{}})", "status is not an integer"},
        {R"({"headers":"x"})", "headers are not a map"},
        {R"({"headers":5})", "headers are not a map"},
        {R"({"headers":["a"]})", "headers are a list"},
        {R"({"headers":{"X":[["nested"]]}})", "header \"X\" is not a string or a list of strings"},
        {R"({"headers":{"X":[{}]}})", "header \"X\" is not"},
        {R"({"headers":{"X":{"a":[]}}})", "header \"X\" is not"},
    };
    for (const auto &tc : cases) {
        SCOPED_TRACE(tc.in);
        ResponseContext r;
        std::string err;
        EXPECT_FALSE(decode(tc.in, Codec::json, r, err));
        EXPECT_NE(err.find(tc.error_part), std::string::npos) << err;
    }
}

TEST(ResponseJson, ErrorShowsTheBytes)
{
    ResponseContext r;
    std::string err;
    ASSERT_FALSE(decode("Fatal error: oops\n", Codec::json, r, err));
    EXPECT_NE(err.find(R"("Fatal error: oops\n")"), std::string::npos) << err;
}

TEST(ResponseJson, ManyHeadersKeepTheirOrder)
{
    std::string in = R"({"status":200,"headers":{)";
    Flat want;
    for (int i = 0; i < 300; ++i) {
        const std::string name = "X-" + std::to_string(299 - i);
        in +=
            (i ? "," : "") + ("\"" + name + "\":[\"" + std::string(static_cast<std::size_t>(i), 'v') + "\"]");
        want.push_back({name, {std::string(static_cast<std::size_t>(i), 'v')}});
    }
    in += "}}";
    ResponseContext r;
    std::string err;
    ASSERT_TRUE(decode(in, Codec::json, r, err)) << err;
    EXPECT_EQ(flat(r), want);
}

// ---- decode_response, msgpack ----

TEST(ResponseMsgpack, Valid)
{
    Mp m;
    m.map(2).str("status").val(301).str("headers").map(2);
    m.str("Location").arr(1).str("/new");
    m.str("Set-Cookie").arr(2).str("a=1").str("b=2");
    ResponseContext r;
    std::string err;
    ASSERT_TRUE(decode(m.bytes(), Codec::msgpack, r, err)) << err;
    EXPECT_EQ(r.status, 301);
    EXPECT_EQ(flat(r), (Flat{{"Location", {"/new"}}, {"Set-Cookie", {"a=1", "b=2"}}}));
}

TEST(ResponseMsgpack, EmptyAndMissingFieldsMean200)
{
    std::vector<std::string> inputs = {""};
    inputs.push_back(Mp().map(0).bytes());
    inputs.push_back(Mp().arr(0).bytes());
    inputs.push_back(Mp().map(1).str("headers").arr(0).bytes()); // PHP packs [] as an array
    inputs.push_back(Mp().map(1).str("headers").map(0).bytes());
    inputs.push_back(Mp().map(2).str("status").nil().str("headers").nil().bytes());
    inputs.push_back(Mp().map(2).val(7).str("ignored key").str("other").val(1).bytes());
    for (const auto &in : inputs) {
        SCOPED_TRACE(relay::printable(in));
        ResponseContext r;
        std::string err;
        ASSERT_TRUE(decode(in, Codec::msgpack, r, err)) << err;
        EXPECT_EQ(r.status, 200);
        EXPECT_TRUE(r.headers.empty());
    }
}

TEST(ResponseMsgpack, OddButAcceptedInputs)
{
    struct Case {
        std::string in;
        int status;
        Flat headers;
    };
    const std::vector<Case> cases = {
        {Mp().map(1).str("status").str("404").bytes(), 404, {}},
        {Mp().map(1).str("status").val(-3).bytes(), -3, {}},
        {Mp().map(1).str("status").val(std::uint64_t{1} << 40).bytes(), INT_MAX, {}},
        {Mp().map(1).str("status").val(std::int64_t{-1} << 40).bytes(), INT_MIN, {}},
        {Mp().map(1).str("status").val(204.0).bytes(), 204, {}},
        {Mp().map(1).str("status").val(204.0f).bytes(), 204, {}},
        {Mp().map(1).bin("status").val(418).bytes(), 418, {}},
        {Mp().map(1).str("headers").map(1).str("X").str("single").bytes(), 200, {{"X", {"single"}}}},
        {Mp().map(1).str("headers").map(1).str("X").bin("bytes\xff").bytes(), 200, {{"X", {"bytes\xff"}}}},
        {Mp().map(1)
             .str("headers")
             .map(1)
             .str("Y")
             .arr(5)
             .val(1)
             .val(-2)
             .val(2.5)
             .val(true)
             .val(false)
             .bytes(),
         200,
         {{"Y", {"1", "-2", "2.5", "1", ""}}}},
        {Mp().map(1).str("headers").map(2).str("X").nil().str("Z").arr(3).str("a").nil().str("b").bytes(),
         200,
         {{"Z", {"a", "b"}}}},
        // PHP: integer-like keys become integers; a list with gaps is a map.
        {Mp().map(1).str("headers").map(1).val(123).arr(1).str("v").bytes(), 200, {{"123", {"v"}}}},
        {Mp().map(1).str("headers").map(1).str("X").map(2).val(0).str("a").val(2).str("b").bytes(),
         200,
         {{"X", {"a", "b"}}}},
        {Mp().map(2).str("headers").map(1).str("A").arr(1).str("1").str("status").val(500).bytes(),
         500,
         {{"A", {"1"}}}},
        // ext-msgpack's packing of PHP objects: (object)[] and (object)['X' => ['1']] (nil key = class name).
        {Mp().map(2).str("status").val(200).str("headers").map(1).nil().str("stdClass").bytes(), 200, {}},
        {Mp().map(1).str("headers").map(2).nil().str("stdClass").str("X").arr(1).str("1").bytes(),
         200,
         {{"X", {"1"}}}},
    };
    for (const auto &tc : cases) {
        SCOPED_TRACE(relay::printable(tc.in));
        ResponseContext r;
        std::string err;
        ASSERT_TRUE(decode(tc.in, Codec::msgpack, r, err)) << err;
        EXPECT_EQ(r.status, tc.status);
        EXPECT_EQ(flat(r), tc.headers);
    }
}

TEST(ResponseMsgpack, InvalidInputsFailWithAnError)
{
    const std::string valid =
        Mp().map(2).str("status").val(200).str("headers").map(1).str("X").arr(1).str("y").bytes();
    struct Case {
        std::string in;
        std::string error_part;
    };
    std::vector<Case> cases = {
        {valid + "\x01", "1 bytes after the msgpack value"},
        {Mp().arr(1).val(1).bytes(), "not a msgpack map"},
        {Mp().val(5).bytes(), "not a msgpack map"},
        {Mp().str("text").bytes(), "not a msgpack map"},
        {Mp().nil().bytes(), "not a msgpack map"},
        {"\xc1", "not valid msgpack"},                       // never-used byte
        {"Fatal error", "10 bytes after the msgpack value"}, // 'F' is the positive fixint 70
        {Mp().map(1).str("status").str("abc").bytes(), "status is not an integer"},
        {Mp().map(1).str("status").val(true).bytes(), "status is not an integer"},
        {Mp().map(1).str("status").val(1.5).bytes(), "status is not an integer"},
        {Mp().map(1).str("status").arr(0).bytes(), "status is not an integer"},
        {Mp().map(1).str("headers").str("x").bytes(), "headers are not a map"},
        {Mp().map(1).str("headers").arr(1).str("x").bytes(), "headers are a list"},
        {Mp().map(1).str("headers").map(1).val(true).arr(1).str("v").bytes(), "header name is not a string"},
        {Mp().map(1).str("headers").map(1).arr(0).arr(1).str("v").bytes(), "header name is not a string"},
        {Mp().map(1).str("headers").map(1).str("X").arr(1).arr(0).bytes(), "header \"X\" is not"},
        {Mp().map(1).str("headers").map(1).str("X").arr(1).map(0).bytes(), "header \"X\" is not"},
    };
    for (std::size_t cut = 1; cut < valid.size(); ++cut)
        cases.push_back({valid.substr(0, cut), "not valid msgpack"});
    for (const auto &tc : cases) {
        SCOPED_TRACE(relay::printable(tc.in));
        ResponseContext r;
        std::string err;
        EXPECT_FALSE(decode(tc.in, Codec::msgpack, r, err));
        EXPECT_NE(err.find(tc.error_part), std::string::npos) << err;
    }
}

TEST(ResponseBoth, RoundTripOfWhatPhpSends)
{
    // json_encode(['status' => 200, 'headers' => ['Content-Type' => ['text/html']]]) and its msgpack twin.
    ResponseContext r;
    std::string err;
    ASSERT_TRUE(decode(R"({"status":200,"headers":{"Content-Type":["text/html"]}})", Codec::json, r, err));
    const Flat want = {{"Content-Type", {"text/html"}}};
    EXPECT_EQ(flat(r), want);
    Mp m;
    m.map(2).str("status").val(200).str("headers").map(1).str("Content-Type").arr(1).str("text/html");
    ASSERT_TRUE(decode(m.bytes(), Codec::msgpack, r, err));
    EXPECT_EQ(flat(r), want);
    EXPECT_EQ(r.status, 200);
}

// Found by fuzz/context_fuzz.cpp (10-minute run): a msgpack map can name a header twice (integer keys 0 and
// 0, or the same string), a JSON object cannot keep both: Boost.JSON keeps the last value in the first one's
// place. Both codecs now answer that way, also past the 16 headers where names are indexed.
TEST(ResponseBoth, ANameGivenTwiceKeepsItsLastValuesInItsFirstPlace)
{
    ResponseContext r;
    std::string err;
    ASSERT_TRUE(decode(R"({"headers":{"A":"1","B":"2","A":["3","4"]}})", Codec::json, r, err)) << err;
    const Flat want = {{"A", {"3", "4"}}, {"B", {"2"}}};
    EXPECT_EQ(flat(r), want);
    Mp m;
    m.map(1).str("headers").map(3).str("A").str("1").str("B").str("2").str("A").arr(2).str("3").str("4");
    ASSERT_TRUE(decode(m.bytes(), Codec::msgpack, r, err)) << err;
    EXPECT_EQ(flat(r), want);
    Mp ints; // the fuzzer's case: integer keys 0, 22, 0
    ints.map(1).str("headers").map(3).val(0).val(1).val(22).val(0).val(0).val(5);
    ASSERT_TRUE(decode(ints.bytes(), Codec::msgpack, r, err)) << err;
    EXPECT_EQ(flat(r), (Flat{{"0", {"5"}}, {"22", {"0"}}}));
    // null (or []) last: nothing is sent under that name
    Mp gone;
    gone.map(1).str("headers").map(3).str("A").str("1").str("B").str("2").str("A").nil();
    ASSERT_TRUE(decode(gone.bytes(), Codec::msgpack, r, err)) << err;
    EXPECT_EQ(flat(r), (Flat{{"B", {"2"}}}));
    ASSERT_TRUE(decode(R"({"headers":{"A":"1","B":"2","A":null}})", Codec::json, r, err)) << err;
    EXPECT_EQ(flat(r), (Flat{{"B", {"2"}}}));
    // many headers: the indexed lookup
    Mp many;
    many.map(1).str("headers").map(42);
    Flat want_many;
    for (int i = 0; i < 40; ++i) {
        many.str("H" + std::to_string(i)).str(std::to_string(i));
        want_many.push_back({"H" + std::to_string(i), {std::to_string(i)}});
    }
    many.str("H3").str("again").str("H39").nil();
    want_many[3].second = {"again"};
    want_many.pop_back();
    ASSERT_TRUE(decode(many.bytes(), Codec::msgpack, r, err)) << err;
    EXPECT_EQ(flat(r), want_many);
}

// Found by fuzz/context_fuzz.cpp: msgpack-cxx allocated an array's or a map's elements from the count in
// its header, so a few bytes claiming 2^32 entries asked for 128 GiB (under ASan: out of memory). A count
// can be no larger than the input; the error now says so, before anything is allocated.
TEST(ResponseMsgpack, HugeCountsAreRefusedBeforeAllocating)
{
    for (std::string in : {std::string("\xdf\xff\xff\xff\xff", 5), std::string("\xdd\xff\xff\xff\xff", 5),
                           std::string("\x81\xa7headers\xdf\x00\x10\x00\x00", 14)}) {
        ResponseContext r;
        auto decoded = relay::decode_response(in, Codec::msgpack, r);
        ASSERT_FALSE(decoded.has_value());
        EXPECT_NE(decoded.error().message.find("size overflow"), std::string::npos)
            << decoded.error().message;
    }
    std::string deep(40, '\x91'); // 40 nested one-element arrays: deeper than a context ever is
    deep += '\x01';
    ResponseContext r;
    auto decoded = relay::decode_response(deep, Codec::msgpack, r);
    ASSERT_FALSE(decoded.has_value());
    EXPECT_NE(decoded.error().message.find("depth"), std::string::npos) << decoded.error().message;
}
