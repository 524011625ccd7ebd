// HTTP request/response contexts (shared protocol.md §3): JSON written by hand (hot path, no DOM),
// msgpack through msgpack-cxx's packer; responses decoded with Boost.JSON / msgpack::unpack.
#include "ferry/relay/context.hpp"

#include <boost/json.hpp>
#include <msgpack.hpp>

#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "ferry/relay/frame.hpp"

namespace ferry::relay {

namespace {

// ---- JSON writing ------------------------------------------------------------------------------------

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
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        default:
            if (c < 0x20) {
                const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0x0F]};
                out.append(esc, 6);
            } else {
                out += "\\ufffd";
            }
        }
        ++p;
        run = p;
    }
    out.append(reinterpret_cast<const char *>(run), static_cast<std::size_t>(end - run));
    out += '"';
}

std::size_t estimate(const RequestContext &c)
{
    std::size_t n =
        160 + c.remote_addr.size() + c.protocol.size() + c.method.size() + c.uri.size() + c.raw_query.size();
    for (const auto &h : c.headers) {
        n += h.name.size() + 8;
        for (const auto &v : h.values)
            n += v.size() + 4;
    }
    for (const auto &[k, v] : c.cookies)
        n += k.size() + v.size() + 8;
    return n;
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
    out += "},\"cookies\":{";
    first = true;
    for (const auto &[k, v] : c.cookies) {
        if (!first)
            out += ',';
        first = false;
        append_json_string(out, k);
        out += ':';
        append_json_string(out, v);
    }
    out += "},\"rawQuery\":";
    append_json_string(out, c.raw_query);
    out += c.parsed ? ",\"parsed\":true" : ",\"parsed\":false";
    out += ",\"uploads\":null,\"attributes\":{}}";
}

// ---- msgpack writing ---------------------------------------------------------------------------------

struct StringSink {
    std::string &s;
    void write(const char *p, std::size_t n) { s.append(p, n); }
};

using Packer = msgpack::packer<StringSink>;

std::uint32_t size32(std::size_t n)
{
    if (n > std::numeric_limits<std::uint32_t>::max())
        throw std::length_error("msgpack context: string or map larger than 4 GiB");
    return static_cast<std::uint32_t>(n);
}

void pack_str(Packer &pk, std::string_view s)
{
    pk.pack_str(size32(s.size()));
    pk.pack_str_body(s.data(), size32(s.size()));
}

void encode_msgpack(const RequestContext &c, std::string &out)
{
    StringSink sink{out};
    Packer pk(sink);
    pk.pack_map(10);
    pack_str(pk, "remoteAddr");
    pack_str(pk, c.remote_addr);
    pack_str(pk, "protocol");
    pack_str(pk, c.protocol);
    pack_str(pk, "method");
    pack_str(pk, c.method);
    pack_str(pk, "uri");
    pack_str(pk, c.uri);
    pack_str(pk, "headers");
    pk.pack_map(size32(c.headers.size()));
    for (const auto &h : c.headers) {
        pack_str(pk, h.name);
        pk.pack_array(size32(h.values.size()));
        for (const auto &v : h.values)
            pack_str(pk, v);
    }
    pack_str(pk, "cookies");
    pk.pack_map(size32(c.cookies.size()));
    for (const auto &[k, v] : c.cookies) {
        pack_str(pk, k);
        pack_str(pk, v);
    }
    pack_str(pk, "rawQuery");
    pack_str(pk, c.raw_query);
    pack_str(pk, "parsed");
    if (c.parsed)
        pk.pack_true();
    else
        pk.pack_false();
    pack_str(pk, "uploads");
    pk.pack_nil();
    pack_str(pk, "attributes");
    pk.pack_map(0);
}

// ---- response decoding (shared helpers) --------------------------------------------------------------

int clamp_status(long double v)
{
    if (v > std::numeric_limits<int>::max())
        return std::numeric_limits<int>::max();
    if (v < std::numeric_limits<int>::min())
        return std::numeric_limits<int>::min();
    return static_cast<int>(v);
}

int clamp_status(std::int64_t v)
{
    if (v > std::numeric_limits<int>::max())
        return std::numeric_limits<int>::max();
    if (v < std::numeric_limits<int>::min())
        return std::numeric_limits<int>::min();
    return static_cast<int>(v);
}

int clamp_status(std::uint64_t v)
{
    return v > static_cast<std::uint64_t>(std::numeric_limits<int>::max()) ? std::numeric_limits<int>::max()
                                                                           : static_cast<int>(v);
}

// "404", "-1": optional sign and digits only.
bool status_from_string(std::string_view s, int &status)
{
    std::string_view digits = s;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+'))
        digits.remove_prefix(1);
    if (digits.empty() || digits.size() > 18)
        return false;
    for (char c : digits)
        if (c < '0' || c > '9')
            return false;
    std::int64_t v = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), v);
    status = clamp_status(s[0] == '-' ? -v : v);
    return true;
}

bool status_from_double(double d, int &status)
{
    if (!std::isfinite(d) || std::trunc(d) != d)
        return false;
    status = clamp_status(static_cast<long double>(d));
    return true;
}

std::string double_to_string(double d)
{
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, r.ptr);
}

// Adds a header unless it has no values (null or an empty list: nothing to send).
void add_header(ResponseContext &out, std::string name, std::vector<std::string> values)
{
    if (name.empty() || values.empty())
        return;
    out.headers.push_back(HeaderField{std::move(name), std::move(values)});
}

std::string quote_name(std::string_view name)
{
    return '"' + printable(name, 64) + '"';
}

// ---- JSON response -----------------------------------------------------------------------------------

namespace json = boost::json;

// A scalar header value as a string; false for arrays and objects. `skip` for null.
bool json_scalar(const json::value &v, std::string &s, bool &skip)
{
    skip = false;
    switch (v.kind()) {
    case json::kind::string:
        s.assign(v.get_string().data(), v.get_string().size());
        return true;
    case json::kind::int64:
        s = std::to_string(v.get_int64());
        return true;
    case json::kind::uint64:
        s = std::to_string(v.get_uint64());
        return true;
    case json::kind::double_:
        s = double_to_string(v.get_double());
        return true;
    case json::kind::bool_:
        s = v.get_bool() ? "1" : "";
        return true; // PHP's string cast
    case json::kind::null:
        skip = true;
        return true;
    default:
        return false;
    }
}

bool json_header_values(const json::value &v, std::vector<std::string> &values)
{
    std::string s;
    bool skip = false;
    auto one = [&](const json::value &e) {
        if (!json_scalar(e, s, skip))
            return false;
        if (!skip)
            values.push_back(std::move(s));
        return true;
    };
    if (v.is_array()) {
        for (const auto &e : v.get_array())
            if (!one(e))
                return false;
        return true;
    }
    if (v.is_object()) { // a PHP array that is not a list (keys with gaps): its values in order
        for (const auto &kv : v.get_object())
            if (!one(kv.value()))
                return false;
        return true;
    }
    return one(v);
}

bool decode_json(std::string_view in, ResponseContext &out, std::string &error)
{
    unsigned char buf[4096];
    json::monotonic_resource mr(buf, sizeof buf);
    json::error_code ec;
    json::value root = json::parse(in, ec, &mr);
    if (ec) {
        error = "response context is not valid JSON (" + ec.message() + "): \"" + printable(in) + '"';
        return false;
    }
    if (root.is_array() && root.get_array().empty())
        return true; // PHP's json_encode([])
    if (!root.is_object()) {
        error = "response context is not a JSON object: \"" + printable(in) + '"';
        return false;
    }
    const json::object &obj = root.get_object();
    if (const json::value *st = obj.if_contains("status")) {
        bool ok = true;
        switch (st->kind()) {
        case json::kind::int64:
            out.status = clamp_status(st->get_int64());
            break;
        case json::kind::uint64:
            out.status = clamp_status(st->get_uint64());
            break;
        case json::kind::double_:
            ok = status_from_double(st->get_double(), out.status);
            break;
        case json::kind::string:
            ok = status_from_string(st->get_string(), out.status);
            break;
        case json::kind::null:
            break;
        default:
            ok = false;
        }
        if (!ok) {
            error = "response status is not an integer: " + json::serialize(*st);
            return false;
        }
    }
    const json::value *hs = obj.if_contains("headers");
    if (!hs || hs->is_null())
        return true;
    if (hs->is_array()) {
        if (hs->get_array().empty())
            return true; // PHP's json_encode([])
        error = "response headers are a list, not a map of name => values";
        return false;
    }
    if (!hs->is_object()) {
        error = "response headers are not a map: " + json::serialize(*hs);
        return false;
    }
    for (const auto &kv : hs->get_object()) {
        std::vector<std::string> values;
        if (!json_header_values(kv.value(), values)) {
            error = "response header " + quote_name(kv.key()) + " is not a string or a list of strings";
            return false;
        }
        add_header(out, std::string(kv.key()), std::move(values));
    }
    return true;
}

// ---- msgpack response --------------------------------------------------------------------------------

bool mp_string(const msgpack::object &o, std::string_view &s)
{
    if (o.type == msgpack::type::STR) {
        s = std::string_view(o.via.str.ptr, o.via.str.size);
        return true;
    }
    if (o.type == msgpack::type::BIN) {
        s = std::string_view(o.via.bin.ptr, o.via.bin.size);
        return true;
    }
    return false;
}

// A map key as a string: PHP turns integer-like string keys ("123") into integers.
bool mp_key(const msgpack::object &o, std::string &s)
{
    std::string_view v;
    if (mp_string(o, v)) {
        s.assign(v);
        return true;
    }
    if (o.type == msgpack::type::POSITIVE_INTEGER) {
        s = std::to_string(o.via.u64);
        return true;
    }
    if (o.type == msgpack::type::NEGATIVE_INTEGER) {
        s = std::to_string(o.via.i64);
        return true;
    }
    return false;
}

bool mp_scalar(const msgpack::object &o, std::string &s, bool &skip)
{
    skip = false;
    std::string_view v;
    if (mp_string(o, v)) {
        s.assign(v);
        return true;
    }
    switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
        s = std::to_string(o.via.u64);
        return true;
    case msgpack::type::NEGATIVE_INTEGER:
        s = std::to_string(o.via.i64);
        return true;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
        s = double_to_string(o.via.f64);
        return true;
    case msgpack::type::BOOLEAN:
        s = o.via.boolean ? "1" : "";
        return true;
    case msgpack::type::NIL:
        skip = true;
        return true;
    default:
        return false;
    }
}

bool mp_header_values(const msgpack::object &o, std::vector<std::string> &values)
{
    std::string s;
    bool skip = false;
    auto one = [&](const msgpack::object &e) {
        if (!mp_scalar(e, s, skip))
            return false;
        if (!skip)
            values.push_back(std::move(s));
        return true;
    };
    if (o.type == msgpack::type::ARRAY) {
        for (std::uint32_t i = 0; i < o.via.array.size; ++i)
            if (!one(o.via.array.ptr[i]))
                return false;
        return true;
    }
    if (o.type == msgpack::type::MAP) { // a PHP array that is not a list: its values in order
        for (std::uint32_t i = 0; i < o.via.map.size; ++i)
            if (!one(o.via.map.ptr[i].val))
                return false;
        return true;
    }
    return one(o);
}

bool decode_msgpack(std::string_view in, ResponseContext &out, std::string &error)
{
    // One zone per thread, cleared and reused: msgpack::unpack() without it allocates and frees an 8 KiB
    // zone for every response.
    static thread_local msgpack::zone zone;
    zone.clear();
    msgpack::object root;
    std::size_t off = 0;
    try {
        root = msgpack::unpack(zone, in.data(), in.size(), off);
    } catch (const std::exception &e) {
        error =
            std::string("response context is not valid msgpack (") + e.what() + "): \"" + printable(in) + '"';
        return false;
    }
    if (off != in.size()) {
        error = "response context has " + std::to_string(in.size() - off) + " bytes after the msgpack value";
        return false;
    }
    if (root.type == msgpack::type::ARRAY && root.via.array.size == 0)
        return true; // PHP's empty array
    if (root.type != msgpack::type::MAP) {
        error = "response context is not a msgpack map: \"" + printable(in) + '"';
        return false;
    }
    const msgpack::object *st = nullptr;
    const msgpack::object *hs = nullptr;
    for (std::uint32_t i = 0; i < root.via.map.size; ++i) {
        std::string_view k;
        if (!mp_string(root.via.map.ptr[i].key, k))
            continue;
        if (k == "status")
            st = &root.via.map.ptr[i].val;
        else if (k == "headers")
            hs = &root.via.map.ptr[i].val;
    }
    if (st) {
        bool ok = true;
        std::string_view s;
        switch (st->type) {
        case msgpack::type::POSITIVE_INTEGER:
            out.status = clamp_status(st->via.u64);
            break;
        case msgpack::type::NEGATIVE_INTEGER:
            out.status = clamp_status(st->via.i64);
            break;
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64:
            ok = status_from_double(st->via.f64, out.status);
            break;
        case msgpack::type::NIL:
            break;
        default:
            ok = mp_string(*st, s) && status_from_string(s, out.status);
        }
        if (!ok) {
            error = "response status is not an integer";
            return false;
        }
    }
    if (!hs || hs->type == msgpack::type::NIL)
        return true;
    if (hs->type == msgpack::type::ARRAY) {
        if (hs->via.array.size == 0)
            return true; // PHP's empty array
        error = "response headers are a list, not a map of name => values";
        return false;
    }
    if (hs->type != msgpack::type::MAP) {
        error = "response headers are not a map";
        return false;
    }
    for (std::uint32_t i = 0; i < hs->via.map.size; ++i) {
        const auto &kv = hs->via.map.ptr[i];
        if (kv.key.type == msgpack::type::NIL)
            continue; // ext-msgpack packs a PHP object as a map whose nil key names the class
        std::string name;
        if (!mp_key(kv.key, name)) {
            error = "response header name is not a string";
            return false;
        }
        std::vector<std::string> values;
        if (!mp_header_values(kv.val, values)) {
            error = "response header " + quote_name(name) + " is not a string or a list of strings";
            return false;
        }
        add_header(out, std::move(name), std::move(values));
    }
    return true;
}

// ---- names and cookies -------------------------------------------------------------------------------

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

// %XX decoded; '+' and malformed escapes kept as they are.
std::string url_decode(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            const int hi = hex_value(s[i + 1]);
            const int lo = hex_value(s[i + 2]);
            if (hi >= 0 && lo >= 0) {
                out += static_cast<char>(hi * 16 + lo);
                i += 2;
                continue;
            }
        }
        // '+' is a space, as RoadRunner (url.QueryUnescape) and PHP-FPM decode it: setcookie("a", "x y")
        // sends x+y.
        out += s[i] == '+' ? ' ' : s[i];
    }
    return out;
}

} // namespace

std::uint8_t codec_flag(Codec c)
{
    return c == Codec::msgpack ? flag::codec_msgpack : flag::codec_json;
}

void encode_request(const RequestContext &ctx, Codec codec, std::string &out)
{
    out.reserve(out.size() + estimate(ctx));
    if (codec == Codec::msgpack)
        encode_msgpack(ctx, out);
    else
        encode_json(ctx, out);
}

bool decode_response(std::string_view in, Codec codec, ResponseContext &out, std::string &error)
{
    out.status = 200;
    out.headers.clear();
    if (in.empty())
        return true;
    try {
        return codec == Codec::msgpack ? decode_msgpack(in, out, error) : decode_json(in, out, error);
    } catch (const std::exception &e) { // allocation failure and the like
        error = std::string("response context: ") + e.what();
        return false;
    }
}

void canonical_header_name(std::string_view name, std::string &out)
{
    out.assign(name);
    for (char c : name)
        if (!is_tchar(static_cast<unsigned char>(c)))
            return;
    bool upper = true;
    for (char &c : out) {
        if (upper && c >= 'a' && c <= 'z')
            c = static_cast<char>(c - 'a' + 'A');
        else if (!upper && c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
        upper = c == '-';
    }
}

std::string canonical_header_name(std::string_view name)
{
    std::string out;
    canonical_header_name(name, out);
    return out;
}

void parse_cookies(std::string_view header, std::vector<std::pair<std::string, std::string>> &out)
{
    // First occurrence of a name wins (as PHP's $_COOKIE). A hash set only when there are many names, so
    // a header of thousands of tiny cookies cannot make this quadratic.
    // (The set owns copies: views into `out` would dangle when it reallocates and moves short strings.)
    std::unordered_set<std::string> seen;
    auto exists = [&](std::string_view name) {
        if (seen.empty() && out.size() < 16) {
            for (const auto &c : out)
                if (c.first == name)
                    return true;
            return false;
        }
        if (seen.empty())
            for (const auto &c : out)
                seen.insert(c.first);
        return seen.contains(std::string(name));
    };

    std::size_t pos = 0;
    while (pos <= header.size()) {
        std::size_t semi = header.find(';', pos);
        if (semi == std::string_view::npos)
            semi = header.size();
        std::string_view part = trim(header.substr(pos, semi - pos));
        pos = semi + 1;
        if (part.empty())
            continue;
        std::string_view name = part;
        std::string_view value;
        if (std::size_t eq = part.find('='); eq != std::string_view::npos) {
            name = trim(part.substr(0, eq));
            value = trim(part.substr(eq + 1));
        }
        if (name.empty() || exists(name))
            continue;
        if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
            value = value.substr(1, value.size() - 2); // Go strips the quotes of a quoted value
        out.emplace_back(std::string(name), url_decode(value));
        if (!seen.empty())
            seen.insert(out.back().first);
    }
}

bool is_token(std::string_view s)
{
    if (s.empty())
        return false;
    for (char c : s)
        if (!is_tchar(static_cast<unsigned char>(c)))
            return false;
    return true;
}

bool iequals(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
        if (x >= 'A' && x <= 'Z')
            x = static_cast<unsigned char>(x + 32);
        if (y >= 'A' && y <= 'Z')
            y = static_cast<unsigned char>(y + 32);
        if (x != y)
            return false;
    }
    return true;
}

int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

} // namespace ferry::relay
