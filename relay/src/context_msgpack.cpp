// The msgpack context codec (docs/protocol.md §3), Ferry's own: requests through msgpack-cxx's packer,
// responses unpacked into a reused zone.
#include "context_codec.hpp"
#include "context_decode.hpp"

#include <msgpack.hpp>

#include <sstream>

namespace ferry::relay::detail {
namespace {

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

// One string entry of a map: key, then value.
void pack_entry(Packer &pk, std::string_view key, std::string_view value)
{
    pack_str(pk, key);
    pack_str(pk, value);
}

void pack_form(Packer &pk, const FormTree &form, const FormNode &array)
{
    const bool list = array.is_list() && !array.items.empty(); // an empty form is a map, as in JSON
    if (list)
        pk.pack_array(size32(array.items.size()));
    else
        pk.pack_map(size32(array.items.size()));
    for (const auto &[key, node] : array.items) {
        if (!list)
            pack_str(pk, key);
        if (node.array) {
            pack_form(pk, form, node);
        } else if (node.file >= 0) {
            const UploadedFile &f = form.files()[static_cast<std::size_t>(node.file)];
            pk.pack_map(5);
            pack_entry(pk, "name", f.name);
            pack_entry(pk, "mime", f.mime);
            pack_str(pk, "size");
            pk.pack_uint64(f.size);
            pack_str(pk, "error");
            pk.pack_int(f.error);
            pack_entry(pk, "tmpName", f.tmp_name);
        } else {
            pack_str(pk, node.value);
        }
    }
}
} // namespace

void encode_form_msgpack(const FormTree &form, std::string &out)
{
    StringSink sink{out};
    Packer pk(sink);
    pack_form(pk, form, form.root());
}

void encode_msgpack(const RequestContext &c, std::string &out)
{
    StringSink sink{out};
    Packer pk(sink);
    pk.pack_map(10);
    pack_entry(pk, "remoteAddr", c.remote_addr);
    pack_entry(pk, "protocol", c.protocol);
    pack_entry(pk, "method", c.method);
    pack_entry(pk, "uri", c.uri);
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
    for (const auto &[k, v] : c.cookies)
        pack_entry(pk, k, v);
    pack_entry(pk, "rawQuery", c.raw_query);
    pack_str(pk, "parsed");
    if (c.parsed)
        pk.pack_true();
    else
        pk.pack_false();
    pack_str(pk, "uploads");
    if (c.uploads)
        pack_form(pk, *c.uploads, c.uploads->root());
    else
        pk.pack_nil();
    pack_str(pk, "attributes");
    pk.pack_map(size32(c.attributes.size()));
    for (const auto &[k, v] : c.attributes)
        pack_entry(pk, k, v);
}

namespace {

std::string_view mp_text(const msgpack::object &o)
{
    return o.type == msgpack::type::STR ? std::string_view(o.via.str.ptr, o.via.str.size)
                                        : std::string_view(o.via.bin.ptr, o.via.bin.size);
}

struct MsgpackAdapter {
    static constexpr const char *map_name = "msgpack map";
    static Kind kind(const msgpack::object &o)
    {
        switch (o.type) {
        case msgpack::type::NIL:
            return Kind::null;
        case msgpack::type::BOOLEAN:
            return Kind::boolean;
        case msgpack::type::NEGATIVE_INTEGER:
            return Kind::integer;
        case msgpack::type::POSITIVE_INTEGER:
            return Kind::unsigned_integer;
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64:
            return Kind::floating;
        case msgpack::type::STR:
        case msgpack::type::BIN:
            return Kind::string;
        case msgpack::type::ARRAY:
            return Kind::list;
        case msgpack::type::MAP:
            return Kind::map;
        default:
            return Kind::other;
        }
    }
    static bool boolean(const msgpack::object &o) { return o.via.boolean; }
    static std::int64_t integer(const msgpack::object &o) { return o.via.i64; }
    static std::uint64_t unsigned_integer(const msgpack::object &o) { return o.via.u64; }
    static double floating(const msgpack::object &o) { return o.via.f64; }
    static std::string_view string(const msgpack::object &o) { return mp_text(o); }
    static bool empty(const msgpack::object &o)
    {
        return o.type == msgpack::type::ARRAY ? o.via.array.size == 0 : o.via.map.size == 0;
    }
    template <typename F> static bool elements(const msgpack::object &o, F &&f)
    {
        for (std::uint32_t i = 0; i < o.via.array.size; ++i)
            if (!f(o.via.array.ptr[i]))
                return false;
        return true;
    }
    // Keys as text: PHP turns integer-like string keys ("123") into integers; ext-msgpack packs a PHP object
    // as a map whose nil key names the class (skipped).
    template <typename F> static bool members(const msgpack::object &o, F &&f)
    {
        for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
            const auto &kv = o.via.map.ptr[i];
            std::string number;
            std::string_view key;
            switch (kv.key.type) {
            case msgpack::type::NIL:
                continue;
            case msgpack::type::STR:
            case msgpack::type::BIN:
                key = mp_text(kv.key);
                break;
            case msgpack::type::POSITIVE_INTEGER:
                key = number = std::to_string(kv.key.via.u64);
                break;
            case msgpack::type::NEGATIVE_INTEGER:
                key = number = std::to_string(kv.key.via.i64);
                break;
            default:
                return false;
            }
            if (!f(key, kv.val))
                return false;
        }
        return true;
    }
    static std::string show(const msgpack::object &o)
    {
        std::ostringstream s;
        s << o;
        return shown(s.str());
    }
};

} // namespace

Result<void> decode_msgpack(std::string_view in, ResponseContext &out)
{
    // One zone per thread, cleared and reused: msgpack::unpack() without it allocates and frees an 8 KiB
    // zone for every response.
    static thread_local msgpack::zone zone;
    zone.clear();
    msgpack::object root;
    std::size_t off = 0;
    try {
        // msgpack-cxx allocates an array's or a map's elements as soon as it reads their count: without a
        // limit, a 5-byte map32 header claiming 2^32 entries made it allocate 128 GiB (fuzz/context). Every
        // element takes at least one byte of the input, so no count may be larger than the input; nesting
        // deeper than a context ever needs is refused too.
        const msgpack::unpack_limit limit(in.size(), in.size() / 2, in.size(), in.size(), in.size(), 32);
        root = msgpack::unpack(zone, in.data(), in.size(), off, nullptr, nullptr, limit);
    } catch (const std::exception &e) {
        return fail(std::string("response context is not valid msgpack (") + e.what() + "): \"" +
                    printable(in) + '"');
    }
    if (off != in.size())
        return fail("response context has " + std::to_string(in.size() - off) +
                    " bytes after the msgpack value");
    return decode_tree<MsgpackAdapter>(root, out);
}

} // namespace ferry::relay::detail
