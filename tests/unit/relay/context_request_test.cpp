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

RequestContext typical_get()
{
    RequestContext c;
    c.remote_addr = "203.0.113.7";
    c.protocol = "HTTP/1.1";
    c.method = "GET";
    c.uri = "http://example.com/items/42?sort=asc&page=2";
    c.headers = {{"Accept", {"text/html", "application/json"}},
                 {"User-Agent", {"curl/8.0"}},
                 {"Cookie", {"sid=abc; theme=dark"}}};
    c.cookies = {{"sid", "abc"}, {"theme", "dark"}};
    c.raw_query = "sort=asc&page=2";
    return c;
}

const std::vector<std::string> context_keys = {"remoteAddr", "protocol", "method", "uri",     "headers",
                                               "cookies",    "rawQuery", "parsed", "uploads", "attributes"};

json::object parse_json(const std::string &s)
{
    json::error_code ec;
    json::value v = json::parse(s, ec); // Boost.JSON rejects invalid UTF-8, as PHP's json_decode does
    EXPECT_FALSE(ec) << ec.message() << " in " << s;
    EXPECT_TRUE(v.is_object()) << s;
    return v.is_object() ? v.get_object() : json::object{};
}

std::string jstr(const json::value &v)
{
    EXPECT_TRUE(v.is_string()) << json::serialize(v);
    return v.is_string() ? std::string(v.get_string()) : std::string();
}

// msgpack map -> key => object (keys must be strings).
std::map<std::string, msgpack::object> mp_map(const msgpack::object &o)
{
    std::map<std::string, msgpack::object> m;
    EXPECT_EQ(o.type, msgpack::type::MAP);
    if (o.type != msgpack::type::MAP)
        return m;
    for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
        EXPECT_EQ(o.via.map.ptr[i].key.type, msgpack::type::STR);
        m.emplace(o.via.map.ptr[i].key.as<std::string>(), o.via.map.ptr[i].val);
    }
    EXPECT_EQ(m.size(), o.via.map.size) << "duplicate keys";
    return m;
}

std::string mstr(const msgpack::object &o)
{
    EXPECT_EQ(o.type, msgpack::type::STR);
    return o.type == msgpack::type::STR ? std::string(o.via.str.ptr, o.via.str.size) : std::string();
}

// Checks an encoded context against ctx, whatever the codec. `text` maps a field as the codec carries it.
void check_json(const RequestContext &c, const std::string &enc, std::string (*text)(const std::string &))
{
    const json::object o = parse_json(enc);
    ASSERT_EQ(o.size(), context_keys.size()) << enc;
    std::size_t i = 0;
    for (const auto &kv : o) // RoadRunner's field order
        EXPECT_EQ(std::string(kv.key()), context_keys[i++]);
    EXPECT_EQ(jstr(o.at("remoteAddr")), text(c.remote_addr));
    EXPECT_EQ(jstr(o.at("protocol")), text(c.protocol));
    EXPECT_EQ(jstr(o.at("method")), text(c.method));
    EXPECT_EQ(jstr(o.at("uri")), text(c.uri));
    EXPECT_EQ(jstr(o.at("rawQuery")), text(c.raw_query));
    ASSERT_TRUE(o.at("parsed").is_bool());
    EXPECT_EQ(o.at("parsed").get_bool(), c.parsed);
    EXPECT_TRUE(o.at("uploads").is_null());
    ASSERT_TRUE(o.at("attributes").is_object());
    const auto &as = o.at("attributes").get_object();
    ASSERT_EQ(as.size(), c.attributes.size());
    std::size_t a = 0;
    for (const auto &kv : as) {
        EXPECT_EQ(std::string(kv.key()), text(c.attributes[a].first));
        EXPECT_EQ(jstr(kv.value()), text(c.attributes[a].second));
        ++a;
    }

    ASSERT_TRUE(o.at("headers").is_object()) << enc;
    const auto &hs = o.at("headers").get_object();
    ASSERT_EQ(hs.size(), c.headers.size());
    std::size_t k = 0;
    for (const auto &kv : hs) {
        const auto &want = c.headers[k++];
        EXPECT_EQ(std::string(kv.key()), text(want.name));
        ASSERT_TRUE(kv.value().is_array());
        const auto &vals = kv.value().get_array();
        ASSERT_EQ(vals.size(), want.values.size());
        for (std::size_t j = 0; j < vals.size(); ++j)
            EXPECT_EQ(jstr(vals[j]), text(want.values[j]));
    }
    ASSERT_TRUE(o.at("cookies").is_object()) << enc;
    const auto &cs = o.at("cookies").get_object();
    ASSERT_EQ(cs.size(), c.cookies.size());
    k = 0;
    for (const auto &kv : cs) {
        EXPECT_EQ(std::string(kv.key()), text(c.cookies[k].first));
        EXPECT_EQ(jstr(kv.value()), text(c.cookies[k].second));
        ++k;
    }
}

void check_msgpack(const RequestContext &c, const std::string &enc)
{
    std::size_t off = 0;
    msgpack::object_handle oh = msgpack::unpack(enc.data(), enc.size(), off);
    EXPECT_EQ(off, enc.size());
    const msgpack::object &root = oh.get();
    ASSERT_EQ(root.type, msgpack::type::MAP);
    ASSERT_EQ(root.via.map.size, context_keys.size());
    for (std::size_t i = 0; i < context_keys.size(); ++i)
        EXPECT_EQ(root.via.map.ptr[i].key.as<std::string>(), context_keys[i]);
    auto m = mp_map(root);
    EXPECT_EQ(mstr(m["remoteAddr"]), c.remote_addr);
    EXPECT_EQ(mstr(m["protocol"]), c.protocol);
    EXPECT_EQ(mstr(m["method"]), c.method);
    EXPECT_EQ(mstr(m["uri"]), c.uri);
    EXPECT_EQ(mstr(m["rawQuery"]), c.raw_query);
    ASSERT_EQ(m["parsed"].type, msgpack::type::BOOLEAN);
    EXPECT_EQ(m["parsed"].via.boolean, c.parsed);
    EXPECT_EQ(m["uploads"].type, msgpack::type::NIL);
    ASSERT_EQ(m["attributes"].type, msgpack::type::MAP);
    auto am = mp_map(m["attributes"]);
    ASSERT_EQ(am.size(), c.attributes.size());
    for (const auto &[k, v] : c.attributes)
        EXPECT_EQ(mstr(am[k]), v);

    const msgpack::object &hs = m["headers"];
    ASSERT_EQ(hs.type, msgpack::type::MAP);
    ASSERT_EQ(hs.via.map.size, c.headers.size());
    for (std::size_t i = 0; i < c.headers.size(); ++i) {
        EXPECT_EQ(mstr(hs.via.map.ptr[i].key), c.headers[i].name);
        const msgpack::object &vals = hs.via.map.ptr[i].val;
        ASSERT_EQ(vals.type, msgpack::type::ARRAY);
        ASSERT_EQ(vals.via.array.size, c.headers[i].values.size());
        for (std::size_t j = 0; j < c.headers[i].values.size(); ++j)
            EXPECT_EQ(mstr(vals.via.array.ptr[j]), c.headers[i].values[j]);
    }
    const msgpack::object &cs = m["cookies"];
    ASSERT_EQ(cs.type, msgpack::type::MAP);
    ASSERT_EQ(cs.via.map.size, c.cookies.size());
    for (std::size_t i = 0; i < c.cookies.size(); ++i) {
        EXPECT_EQ(mstr(cs.via.map.ptr[i].key), c.cookies[i].first);
        EXPECT_EQ(mstr(cs.via.map.ptr[i].val), c.cookies[i].second);
    }
}

std::string same(const std::string &s)
{
    return s;
}

std::string encode(const RequestContext &c, Codec codec)
{
    std::string out;
    relay::encode_request(c, codec, out);
    return out;
}

} // namespace

TEST(Codec, Flags)
{
    EXPECT_EQ(relay::codec_flag(Codec::json), 0x08);
    EXPECT_EQ(relay::codec_flag(Codec::msgpack), 0x10);
}

TEST(RequestJson, TypicalGetRoundTrips)
{
    const RequestContext c = typical_get();
    const std::string enc = encode(c, Codec::json);
    check_json(c, enc, same);
    EXPECT_EQ(enc.substr(0, 30), R"({"remoteAddr":"203.0.113.7","p)");
}

TEST(RequestJson, EmptyContextHasMapsNotLists)
{
    RequestContext c;
    c.parsed = true;
    const std::string enc = encode(c, Codec::json);
    EXPECT_EQ(enc, R"({"remoteAddr":"","protocol":"","method":"","uri":"","headers":{},"cookies":{},)"
                   R"("rawQuery":"","parsed":true,"uploads":null,"attributes":{}})");
    check_json(c, enc, same);
}

TEST(RequestJson, AppendsToOut)
{
    std::string out = "prefix";
    relay::encode_request(typical_get(), Codec::json, out);
    ASSERT_EQ(out.substr(0, 6), "prefix");
    check_json(typical_get(), out.substr(6), same);
}

TEST(RequestJson, EscapesQuotesBackslashesAndControlChars)
{
    std::string all_controls;
    for (int i = 0; i < 0x20; ++i)
        all_controls += static_cast<char>(i);
    all_controls += "\x7f";
    RequestContext c;
    c.remote_addr = R"(say "hi")";
    c.protocol = R"(C:\path\)";
    c.method = all_controls;
    c.uri = "/\"\\/\n";
    c.headers = {{"X-\"Quote\"", {"a\"b", "c\\d", "tab\there", ""}}};
    c.cookies = {{"k\\", "v\r\n"}};
    c.raw_query = "</script>&\u2028";
    const std::string enc = encode(c, Codec::json);
    check_json(c, enc, same);
    EXPECT_NE(enc.find(R"("say \"hi\"")"), std::string::npos) << enc;
    EXPECT_NE(enc.find(R"("C:\\path\\")"), std::string::npos) << enc;
    EXPECT_NE(enc.find(R"("\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f)"
                       R"(\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c)"
                       R"(\u001d\u001e\u001f)"
                       "\x7f\""),
              std::string::npos)
        << enc;
    for (char ch : enc)
        EXPECT_GE(static_cast<unsigned char>(ch), 0x20) << "raw control byte in JSON";
}

TEST(RequestJson, KeepsValidUtf8)
{
    RequestContext c;
    c.uri = "http://example.com/caf\xc3\xa9/\xe4\xb8\xad/\xf0\x9f\x98\x80/\xef\xbf\xbf/\xf4\x8f\xbf\xbf";
    const std::string enc = encode(c, Codec::json);
    check_json(c, enc, same);
    EXPECT_NE(enc.find(c.uri), std::string::npos); // unescaped
}

TEST(RequestJson, ReplacesInvalidUtf8WithReplacementChar)
{
    const std::string fffd = "\xef\xbf\xbd";
    struct Case {
        std::string in, want;
    };
    const std::vector<Case> cases = {
        {"\xff", fffd},
        {"a\x80z", "a" + fffd + "z"},
        {"\xc3", fffd},            // truncated 2-byte
        {"\xe2\x82", fffd + fffd}, // truncated 3-byte: one per byte, as Go
        {"\xe2\x82x", fffd + fffd + "x"},
        {"\xc0\xaf", fffd + fffd},                       // overlong '/'
        {"\xe0\x80\xaf", fffd + fffd + fffd},            // overlong
        {"\xed\xa0\x80", fffd + fffd + fffd},            // UTF-16 surrogate
        {"\xf4\x90\x80\x80", fffd + fffd + fffd + fffd}, // > U+10FFFF
        {"\xf5\x80\x80\x80", fffd + fffd + fffd + fffd},
        {"\xf0\x9f\x98", fffd + fffd + fffd}, // truncated 4-byte
        {"ok\xc3\xa9\xff\xc3\xa9", "ok\xc3\xa9" + fffd + "\xc3\xa9"},
    };
    for (const auto &tc : cases) {
        SCOPED_TRACE(relay::printable(tc.in));
        RequestContext c;
        c.method = tc.in;
        c.headers = {{tc.in, {tc.in}}};
        c.cookies = {{"c", tc.in}};
        const std::string enc = encode(c, Codec::json);
        const json::object o = parse_json(enc);
        EXPECT_EQ(jstr(o.at("method")), tc.want);
        ASSERT_TRUE(o.at("headers").is_object());
        const auto &hs = o.at("headers").get_object();
        ASSERT_EQ(hs.size(), 1u);
        EXPECT_EQ(std::string(hs.begin()->key()), tc.want);
        EXPECT_EQ(jstr(hs.begin()->value().at(0)), tc.want);
        EXPECT_EQ(jstr(o.at("cookies").at("c")), tc.want);
        EXPECT_NE(enc.find("\\ufffd"), std::string::npos) << enc; // escaped, as Go writes it
    }
}

TEST(RequestJson, InvalidUtf8DecodesAsReplacement)
{
    // check_json with a mapping: every field is the invalid input, decoded as its expected replacement.
    RequestContext c;
    c.remote_addr = "\xff";
    c.protocol = "a\x80z";
    c.method = "\xe2\x82x";
    c.uri = "\xed\xa0\x80";
    c.raw_query = "ok\xc3\xa9\xff";
    c.headers = {{"X-\xfe", {"\xc0\xaf"}}};
    c.cookies = {{"\xf5", "\xf0\x9f\x98"}};
    const std::string enc = encode(c, Codec::json);
    check_json(c, enc, [](const std::string &s) {
        // Reference implementation of the rule: each byte outside a valid sequence -> U+FFFD.
        static const std::map<std::string, std::string> table = {
            {"\xff", "\xef\xbf\xbd"},
            {"a\x80z", "a\xef\xbf\xbdz"},
            {"\xe2\x82x", "\xef\xbf\xbd\xef\xbf\xbdx"},
            {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
            {"ok\xc3\xa9\xff", "ok\xc3\xa9\xef\xbf\xbd"},
            {"X-\xfe", "X-\xef\xbf\xbd"},
            {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},
            {"\xf5", "\xef\xbf\xbd"},
            {"\xf0\x9f\x98", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        };
        auto it = table.find(s);
        return it == table.end() ? s : it->second;
    });
    EXPECT_NE(enc.find(R"("remoteAddr":"\ufffd")"), std::string::npos) << enc;
}

TEST(RequestMsgpack, TypicalGetRoundTrips)
{
    const RequestContext c = typical_get();
    check_msgpack(c, encode(c, Codec::msgpack));
}

TEST(RequestMsgpack, EmptyContextHasMapsNotLists)
{
    RequestContext c;
    const std::string enc = encode(c, Codec::msgpack);
    check_msgpack(c, enc);
    // headers, cookies, attributes: fixmap 0 (0x80), never fixarray 0 (0x90).
    EXPECT_EQ(enc.find('\x90'), std::string::npos);
    EXPECT_NE(enc.find("\xa7headers\x80"), std::string::npos);
    EXPECT_NE(enc.find("\xa7"
                       "cookies\x80"),
              std::string::npos);
    EXPECT_NE(enc.find("\xa7uploads\xc0"), std::string::npos);
    EXPECT_NE(enc.find("\xaa"
                       "attributes\x80"),
              std::string::npos);
    EXPECT_EQ(static_cast<unsigned char>(enc[0]), 0x8a); // fixmap of 10
}

TEST(RequestMsgpack, CarriesArbitraryBytesUnchanged)
{
    std::string bytes;
    for (int i = 0; i < 256; ++i)
        bytes += static_cast<char>(i);
    RequestContext c = typical_get();
    c.uri = bytes;
    c.headers.push_back({"X-Bin", {bytes, std::string(70000, 'z')}});
    c.cookies.emplace_back("q\"\\", bytes);
    c.parsed = true;
    check_msgpack(c, encode(c, Codec::msgpack));
}

TEST(RequestMsgpack, AppendsToOut)
{
    std::string out = "xy";
    relay::encode_request(typical_get(), Codec::msgpack, out);
    ASSERT_EQ(out.substr(0, 2), "xy");
    check_msgpack(typical_get(), out.substr(2));
}

TEST(RequestBoth, ManyHeadersUseLargeMaps)
{
    RequestContext c;
    for (int i = 0; i < 40; ++i)
        c.headers.push_back({"X-H" + std::to_string(i), {std::to_string(i)}});
    for (int i = 0; i < 20; ++i)
        c.cookies.emplace_back("c" + std::to_string(i), std::string(static_cast<std::size_t>(i), 'v'));
    check_json(c, encode(c, Codec::json), same);
    check_msgpack(c, encode(c, Codec::msgpack));
}

// WebSocket events carry their fields as attributes (docs/protocol.md §9): string pairs, in order.
TEST(RequestAttributes, EncodedInBothCodecs)
{
    RequestContext c = typical_get();
    c.attributes = {{"ferry.ws.event", "message"}, {"ferry.ws.id", "0.42"}, {"quote\"key", "line\nbreak"}};
    const std::string j = encode(c, Codec::json);
    check_json(c, j, same);
    EXPECT_NE(
        j.find(
            R"("attributes":{"ferry.ws.event":"message","ferry.ws.id":"0.42","quote\"key":"line\nbreak"}})"),
        std::string::npos)
        << j;
    check_msgpack(c, encode(c, Codec::msgpack));
}
