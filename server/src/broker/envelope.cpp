#include "broker/envelope.hpp"

#include <msgpack.hpp>

namespace ferry::server::detail::broker {
namespace {

struct Sink {
    std::string &out;
    void write(const char *p, std::size_t n) { out.append(p, n); }
};

constexpr std::uint32_t fields = 10;

} // namespace

std::string encode(const Envelope &e, std::string_view payload)
{
    std::string out;
    out.reserve(64 + payload.size());
    Sink sink{out};
    msgpack::packer<Sink> pk(sink);
    pk.pack_array(fields);
    pk.pack(Envelope::version);
    pk.pack(static_cast<unsigned>(e.kind));
    pk.pack(e.origin);
    pk.pack(e.topics);
    pk.pack(e.topic);
    pk.pack(e.ids);
    pk.pack(e.binary);
    pk.pack(e.event_id);
    pk.pack_bin(static_cast<std::uint32_t>(payload.size()));
    pk.pack_bin_body(payload.data(), static_cast<std::uint32_t>(payload.size()));
    pk.pack(e.code);
    return out;
}

std::optional<Envelope> decode(std::string_view bytes, std::string &why)
{
    try {
        // Bounded: a peer on the channel cannot make this node allocate much more than it sent.
        const msgpack::unpack_limit limit(1u << 16, 0, 1u << 16, 1u << 30, 0, 3);
        msgpack::object_handle h = msgpack::unpack(bytes.data(), bytes.size(), nullptr, nullptr, limit);
        const msgpack::object &o = h.get();
        if (o.type != msgpack::type::ARRAY || o.via.array.size < fields) {
            why = "not an array of " + std::to_string(fields) + " items";
            return std::nullopt;
        }
        const msgpack::object *f = o.via.array.ptr;
        if (f[0].as<unsigned>() != Envelope::version) {
            why = "format version " + std::to_string(f[0].as<unsigned>()) + " (this node reads " +
                  std::to_string(Envelope::version) + ")";
            return std::nullopt;
        }
        Envelope e;
        const unsigned kind = f[1].as<unsigned>();
        if (kind > 2) {
            why = "unknown kind " + std::to_string(kind);
            return std::nullopt;
        }
        e.kind = static_cast<Envelope::Kind>(kind);
        e.origin = f[2].as<std::string>();
        e.topics = f[3].as<std::vector<std::string>>();
        e.topic = f[4].as<std::uint32_t>();
        e.ids = f[5].as<std::vector<std::uint64_t>>();
        e.binary = f[6].as<bool>();
        e.event_id = f[7].as<std::uint64_t>();
        if (f[8].type != msgpack::type::BIN) {
            why = "the payload is not bytes";
            return std::nullopt;
        }
        e.payload.assign(f[8].via.bin.ptr, f[8].via.bin.size);
        e.code = f[9].as<std::uint16_t>();
        if (e.kind == Envelope::Kind::publish && e.topic >= e.topics.size()) {
            why = "topic index out of its list";
            return std::nullopt;
        }
        return e;
    } catch (const std::exception &x) {
        why = std::string("not msgpack of the expected shape (") + x.what() + ")";
        return std::nullopt;
    }
}

bool frame_payload(std::string_view frame, std::string_view &payload, bool &binary)
{
    if (frame.size() < 2 || (frame[1] & 0x80) != 0)
        return false;
    const auto op = static_cast<unsigned char>(frame[0]) & 0x0f;
    if (op != 1 && op != 2)
        return false;
    binary = op == 2;
    std::size_t len = static_cast<unsigned char>(frame[1]) & 0x7f, head = 2;
    if (len == 126) {
        if (frame.size() < 4)
            return false;
        len = (std::size_t(static_cast<unsigned char>(frame[2])) << 8) | static_cast<unsigned char>(frame[3]);
        head = 4;
    } else if (len == 127) {
        if (frame.size() < 10)
            return false;
        len = 0;
        for (int i = 2; i < 10; ++i)
            len = (len << 8) | static_cast<unsigned char>(frame[static_cast<std::size_t>(i)]);
        head = 10;
    }
    if (frame.size() - head != len)
        return false;
    payload = frame.substr(head);
    return true;
}

} // namespace ferry::server::detail::broker
