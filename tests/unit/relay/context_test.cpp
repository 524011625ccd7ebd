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
    EXPECT_TRUE(o.at("attributes").get_object().empty());

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
    EXPECT_EQ(m["attributes"].via.map.size, 0u);

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
    return relay::decode_response(in, codec, r, err);
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
        EXPECT_EQ(relay::canonical_header_name(in), want) << relay::printable(in);
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
        relay::parse_cookies(in, out);
        EXPECT_EQ(out, want) << in;
    }
}

TEST(ParseCookies, AppendsAndKeepsFirstAcrossCalls)
{
    std::vector<std::pair<std::string, std::string>> out;
    relay::parse_cookies("a=1; b=2", out);
    relay::parse_cookies("b=3; c=4", out);
    EXPECT_EQ(out, (std::vector<std::pair<std::string, std::string>>{{"a", "1"}, {"b", "2"}, {"c", "4"}}));
}

TEST(ParseCookies, ManyCookiesStayUniqueAndFast)
{
    std::string header;
    for (int i = 0; i < 5000; ++i)
        header += "c" + std::to_string(i % 2500) + "=" + std::to_string(i) + "; ";
    std::vector<std::pair<std::string, std::string>> out;
    relay::parse_cookies(header, out);
    ASSERT_EQ(out.size(), 2500u);
    for (int i = 0; i < 2500; ++i) {
        EXPECT_EQ(out[static_cast<std::size_t>(i)].first, "c" + std::to_string(i));
        EXPECT_EQ(out[static_cast<std::size_t>(i)].second, std::to_string(i)); // the first one
    }
}

TEST(Tokens, IsTokenAndIequals)
{
    using ferry::relay::iequals;
    using ferry::relay::is_token;
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
