// The JSON context codec (docs/protocol.md §3): requests written by hand (hot path, no DOM), as RoadRunner up
// to 2023.3 sent them; responses read with Boost.JSON.
#include "context_codec.hpp"
#include "context_decode.hpp"
#include "ferry/conf/text.hpp"

#include <boost/json.hpp>

namespace ferry::relay::detail {
namespace {

// Length of the valid UTF-8 sequence at p (Go's utf8 rules: no overlongs, no surrogates, <= U+10FFFF),
// or 0 if the bytes at p do not start one.
std::size_t utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    const unsigned char c = p[0];
    const auto left = static_cast<std::size_t>(end - p);
    auto cont = [&](std::size_t i) { return (p[i] & 0xC0u) == 0x80u; };
    if (c >= 0xC2 && c <= 0xDF)
        return left >= 2 && cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || !cont(1) || !cont(2))
            return 0;
        if (c == 0xE0 && p[1] < 0xA0)
            return 0; // overlong
        if (c == 0xED && p[1] > 0x9F)
            return 0; // surrogate
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || !cont(1) || !cont(2) || !cont(3))
            return 0;
        if (c == 0xF0 && p[1] < 0x90)
            return 0; // overlong
        if (c == 0xF4 && p[1] > 0x8F)
            return 0; // > U+10FFFF
        return 4;
    }
    return 0;
}

// Appends s as a JSON string. Control characters, quotes and backslashes are escaped; each byte that is
// not part of valid UTF-8 becomes \ufffd (as Go's encoding/json does), so PHP's json_decode accepts it.
void append_json_string(std::string &out, std::string_view s)
{
    static constexpr char hex[] = "0123456789abcdef";
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const auto *end = p + s.size();
    const auto *run = p;
    out += '"';
    while (p < end) {
        const unsigned char c = *p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            ++p;
            continue;
        }
        if (c >= 0x80) {
            if (std::size_t n = utf8_sequence(p, end)) {
                p += n;
                continue;
            }
        }
        out.append(reinterpret_cast<const char *>(run), static_cast<std::size_t>(p - run));
        if (const char *esc = short_escape(c)) {
            out += esc;
        } else if (c == '\b') {
            out += "\\b";
        } else if (c == '\f') {
            out += "\\f";
        } else if (c < 0x20) {
            const char esc6[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0x0F]};
            out.append(esc6, 6);
        } else {
            out += "\\ufffd";
        }
        ++p;
        run = p;
    }
    out.append(reinterpret_cast<const char *>(run), static_cast<std::size_t>(end - run));
    out += '"';
}

// {"k":"v",...} of string pairs, in order (cookies, attributes).
void append_json_map(std::string &out, const std::vector<std::pair<std::string, std::string>> &pairs)
{
    out += '{';
    bool first = true;
    for (const auto &[k, v] : pairs) {
        if (!first)
            out += ',';
        first = false;
        append_json_string(out, k);
        out += ':';
        append_json_string(out, v);
    }
    out += '}';
}

namespace json = boost::json;

struct JsonAdapter {
    static constexpr const char *map_name = "JSON object";
    static Kind kind(const json::value &v)
    {
        switch (v.kind()) {
        case json::kind::null:
            return Kind::null;
        case json::kind::bool_:
            return Kind::boolean;
        case json::kind::int64:
            return Kind::integer;
        case json::kind::uint64:
            return Kind::unsigned_integer;
        case json::kind::double_:
            return Kind::floating;
        case json::kind::string:
            return Kind::string;
        case json::kind::array:
            return Kind::list;
        case json::kind::object:
            return Kind::map;
        }
        return Kind::other;
    }
    static bool boolean(const json::value &v) { return v.get_bool(); }
    static std::int64_t integer(const json::value &v) { return v.get_int64(); }
    static std::uint64_t unsigned_integer(const json::value &v) { return v.get_uint64(); }
    static double floating(const json::value &v) { return v.get_double(); }
    static std::string_view string(const json::value &v) { return v.get_string(); }
    static bool empty(const json::value &v)
    {
        return v.is_array() ? v.get_array().empty() : v.get_object().empty();
    }
    template <typename F> static bool elements(const json::value &v, F &&f)
    {
        for (const auto &e : v.get_array())
            if (!f(e))
                return false;
        return true;
    }
    template <typename F> static bool members(const json::value &v, F &&f)
    {
        for (const auto &kv : v.get_object())
            if (!f(std::string_view(kv.key()), kv.value()))
                return false;
        return true;
    }
    static std::string show(const json::value &v) { return shown(json::serialize(v)); }
};

} // namespace

namespace {
void json_form_array(const FormTree &form, const FormNode &array, std::string &out)
{
    const bool list = array.is_list() && !array.items.empty(); // an empty form is {} (docs/protocol.md §3)
    out += list ? '[' : '{';
    bool first = true;
    for (const auto &[key, node] : array.items) {
        if (!first)
            out += ',';
        first = false;
        if (!list) {
            append_json_string(out, key);
            out += ':';
        }
        if (node.array) {
            json_form_array(form, node, out);
        } else if (node.file >= 0) {
            const UploadedFile &f = form.files()[static_cast<std::size_t>(node.file)];
            out += "{\"name\":";
            append_json_string(out, f.name);
            out += ",\"mime\":";
            append_json_string(out, f.mime);
            out += ",\"size\":" + std::to_string(f.size) + ",\"error\":" + std::to_string(f.error) +
                   ",\"tmpName\":";
            append_json_string(out, f.tmp_name);
            out += '}';
        } else {
            append_json_string(out, node.value);
        }
    }
    out += list ? ']' : '}';
}
} // namespace

void encode_form_json(const FormTree &form, std::string &out)
{
    json_form_array(form, form.root(), out);
}

void encode_json(const RequestContext &c, std::string &out)
{
    out += "{\"remoteAddr\":";
    append_json_string(out, c.remote_addr);
    out += ",\"protocol\":";
    append_json_string(out, c.protocol);
    out += ",\"method\":";
    append_json_string(out, c.method);
    out += ",\"uri\":";
    append_json_string(out, c.uri);
    out += ",\"headers\":{";
    bool first = true;
    for (const auto &h : c.headers) {
        if (!first)
            out += ',';
        first = false;
        append_json_string(out, h.name);
        out += ":[";
        for (std::size_t i = 0; i < h.values.size(); ++i) {
            if (i)
                out += ',';
            append_json_string(out, h.values[i]);
        }
        out += ']';
    }
    out += "},\"cookies\":";
    append_json_map(out, c.cookies);
    out += ",\"rawQuery\":";
    append_json_string(out, c.raw_query);
    out += c.parsed ? ",\"parsed\":true" : ",\"parsed\":false";
    out += ",\"uploads\":";
    if (c.uploads)
        encode_form_json(*c.uploads, out);
    else
        out += "null";
    out += ",\"attributes\":";
    append_json_map(out, c.attributes);
    out += '}';
}

Result<void> decode_json(std::string_view in, ResponseContext &out)
{
    unsigned char buf[4096];
    json::monotonic_resource mr(buf, sizeof buf);
    json::error_code ec;
    json::value root = json::parse(in, ec, &mr);
    if (ec)
        return fail("response context is not valid JSON (" + ec.message() + "): \"" + printable(in) + '"');
    return decode_tree<JsonAdapter>(root, out);
}

} // namespace ferry::relay::detail
