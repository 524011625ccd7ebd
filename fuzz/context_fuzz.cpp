// The HTTP context codecs (docs/protocol.md §3). First byte, low bit 0: the rest is a response context in
// JSON (bit 1 clear) or msgpack (bit 1 set) for decode_response; a context it accepts is encoded again in
// the other codec and must decode to the same status and headers. Low bit 1: the rest, split at NUL bytes,
// fills a request context, encoded by encode_request in both codecs and read back with Boost.JSON and
// msgpack-cxx: every field comes back (in JSON, invalid UTF-8 as U+FFFD, so compared only when valid).
#include "fuzz_util.hpp"

#include "ferry/relay/context.hpp"
#include "ws/utf8.hpp"

#include <boost/json.hpp>
#include <msgpack.hpp>

#include <string>
#include <vector>

namespace {

namespace relay = ferry::relay;

std::string response_json(const relay::ResponseContext &c)
{
    boost::json::object headers;
    std::string out = "{\"status\":" + std::to_string(c.status) + ",\"headers\":{";
    bool first = true;
    for (const auto &h : c.headers) {
        if (!first)
            out += ',';
        first = false;
        out += boost::json::serialize(boost::json::string(h.name));
        out += ":[";
        for (std::size_t i = 0; i < h.values.size(); ++i) {
            if (i)
                out += ',';
            out += boost::json::serialize(boost::json::string(h.values[i]));
        }
        out += ']';
    }
    return out + "}}";
}

std::string response_msgpack(const relay::ResponseContext &c)
{
    msgpack::sbuffer buf;
    msgpack::packer<msgpack::sbuffer> pk(buf);
    pk.pack_map(2);
    pk.pack(std::string("status"));
    pk.pack(c.status);
    pk.pack(std::string("headers"));
    pk.pack_map(static_cast<std::uint32_t>(c.headers.size()));
    for (const auto &h : c.headers) {
        pk.pack(h.name);
        pk.pack(h.values);
    }
    return std::string(buf.data(), buf.size());
}

bool same(const relay::ResponseContext &a, const relay::ResponseContext &b)
{
    if (a.status != b.status || a.headers.size() != b.headers.size())
        return false;
    for (std::size_t i = 0; i < a.headers.size(); ++i)
        if (a.headers[i].name != b.headers[i].name || a.headers[i].values != b.headers[i].values)
            return false;
    return true;
}

void response(std::string_view in, relay::Codec codec)
{
    relay::ResponseContext c;
    auto r = relay::decode_response(in, codec, c);
    if (!r) {
        FUZZ_CHECK(!r.error().message.empty());
        return;
    }
    relay::ResponseContext back;
    bool to_json = codec == relay::Codec::msgpack;
    // JSON strings must be UTF-8: a msgpack header with other bytes cannot be carried over as is.
    if (to_json) {
        for (const auto &h : c.headers) {
            if (!ferry::server::detail::ws::valid_utf8(h.name))
                return;
            for (const auto &v : h.values)
                if (!ferry::server::detail::ws::valid_utf8(v))
                    return;
        }
    }
    std::string again = to_json ? response_json(c) : response_msgpack(c);
    auto r2 = relay::decode_response(again, to_json ? relay::Codec::json : relay::Codec::msgpack, back);
    if (!r2)
        std::fprintf(stderr, "re-encoded context refused: %s\n", r2.error().message.c_str());
    FUZZ_CHECK(r2);
    FUZZ_CHECK(same(c, back));
}

void request(std::string_view in)
{
    std::vector<std::string> f;
    for (std::size_t start = 0;;) {
        auto end = in.find('\0', start);
        f.emplace_back(
            in.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        if (end == std::string_view::npos || f.size() == 12)
            break;
        start = end + 1;
    }
    f.resize(12);
    relay::RequestContext c;
    c.remote_addr = f[0];
    c.protocol = f[1];
    c.method = f[2];
    c.uri = f[3];
    c.headers.push_back({f[4], {f[5], f[6]}});
    c.cookies.emplace_back(f[7], f[8]);
    c.raw_query = f[9];
    c.attributes.emplace_back(f[10], f[11]);
    c.parsed = !f[9].empty() && f[9][0] & 1;

    std::string mp;
    relay::encode_request(c, relay::Codec::msgpack, mp);
    std::size_t off = 0;
    auto oh = msgpack::unpack(mp.data(), mp.size(), off);
    FUZZ_CHECK(off == mp.size());
    auto m = oh.get().as<std::map<std::string, msgpack::object>>();
    FUZZ_CHECK(m.at("remoteAddr").as<std::string>() == c.remote_addr);
    FUZZ_CHECK(m.at("uri").as<std::string>() == c.uri);
    FUZZ_CHECK(m.at("rawQuery").as<std::string>() == c.raw_query);
    FUZZ_CHECK(m.at("parsed").as<bool>() == c.parsed);
    auto headers = m.at("headers").as<std::map<std::string, std::vector<std::string>>>();
    FUZZ_CHECK(headers.at(f[4]) == (std::vector<std::string>{f[5], f[6]}));

    std::string json;
    relay::encode_request(c, relay::Codec::json, json);
    boost::system::error_code ec;
    auto v = boost::json::parse(json, ec);
    FUZZ_CHECK(!ec && v.is_object());
    const auto &o = v.as_object();
    auto check = [&](const char *key, const std::string &want) {
        const auto &s = o.at(key).as_string();
        if (ferry::server::detail::ws::valid_utf8(want))
            FUZZ_CHECK(std::string_view(s) == want);
    };
    check("remoteAddr", c.remote_addr);
    check("protocol", c.protocol);
    check("method", c.method);
    check("uri", c.uri);
    check("rawQuery", c.raw_query);
    FUZZ_CHECK(o.at("parsed").as_bool() == c.parsed);
    if (ferry::server::detail::ws::valid_utf8(f[4]) && ferry::server::detail::ws::valid_utf8(f[5])) {
        const auto &hv = o.at("headers").as_object().at(f[4]).as_array();
        FUZZ_CHECK(hv.size() == 2 && std::string_view(hv[0].as_string()) == f[5]);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    fuzz::Input in(data, size);
    std::uint8_t mode = in.byte();
    try {
        if (mode & 1)
            request(in.rest());
        else
            response(in.rest(), mode & 2 ? relay::Codec::msgpack : relay::Codec::json);
    } catch (const std::exception &e) { // the checks' own decoding (msgpack-cxx, Boost.JSON) failing
        std::fprintf(stderr, "exception: %s\n", e.what());
        std::abort();
    }
    return 0;
}
