// The JSON context codec (docs/protocol.md §3): requests written by hand (hot path, no DOM), as RoadRunner up
// to 2023.3 sent them; responses read with Boost.JSON.
#include "context_codec.hpp"
#include "context_decode.hpp"
#include "ferry/base/json_string.hpp"
#include "ferry/base/text.hpp"

#include <boost/json.hpp>

namespace ferry::relay::detail {
namespace {

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
