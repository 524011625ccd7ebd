// Goridge v3 frame header codec (docs/protocol.md §1).
#include "ferry/relay/frame.hpp"

#include <cstring>
#include <stdexcept>

namespace ferry::relay {

namespace {

// CRC-32 with the zlib/IEEE reflected polynomial 0xEDB88320, byte-wise with a 256-entry table built at
// compile time. Only 6 header bytes are ever checksummed per frame, so this beats linking zlib.
constexpr std::array<std::uint32_t, 256> make_crc_table()
{
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k)
            c = (c & 1u) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
        t[i] = c;
    }
    return t;
}

constexpr std::array<std::uint32_t, 256> crc_table = make_crc_table();

void put_u32(std::uint8_t *p, std::uint32_t v)
{
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v >> 16);
    p[3] = static_cast<std::uint8_t>(v >> 24);
}

std::uint32_t get_u32(const char *s)
{
    const auto *p = reinterpret_cast<const unsigned char *>(s);
    return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
           static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

DecodeResult fail(std::string why, std::string_view in)
{
    DecodeResult r;
    r.status = DecodeStatus::error;
    r.needed = 0;
    r.error = std::move(why);
    r.error += ": \"";
    r.error += printable(in, 256); // enough for a PHP warning or fatal error line
    r.error += '"';
    return r;
}

} // namespace

std::uint32_t crc32(const void *data, std::size_t size)
{
    const auto *p = static_cast<const unsigned char *>(data);
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < size; ++i)
        c = crc_table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

std::size_t encode_header(std::uint8_t *out, std::uint8_t flags, std::uint8_t stream_bits,
                          std::uint32_t payload_size, std::span<const std::uint32_t> options)
{
    if (options.size() > max_options)
        throw std::length_error("goridge frame: more than 10 options");
    out[0] = static_cast<std::uint8_t>(0x10u | (3u + options.size()));
    out[1] = flags;
    put_u32(out + 2, payload_size);
    put_u32(out + 6, crc32(out, 6));
    out[10] = stream_bits;
    out[11] = 0;
    std::uint8_t *p = out + header_size;
    for (std::uint32_t o : options) {
        put_u32(p, o);
        p += 4;
    }
    return static_cast<std::size_t>(p - out);
}

std::string encode_frame(std::uint8_t flags, std::uint8_t stream_bits, std::span<const std::uint32_t> options,
                         std::string_view payload)
{
    if (payload.size() > 0xFFFFFFFFu)
        throw std::length_error("goridge frame: payload larger than 4 GiB");
    std::uint8_t head[max_header_size];
    std::size_t n =
        encode_header(head, flags, stream_bits, static_cast<std::uint32_t>(payload.size()), options);
    std::string out;
    out.reserve(n + payload.size());
    out.append(reinterpret_cast<const char *>(head), n);
    out.append(payload);
    return out;
}

DecodeResult decode_header(std::string_view in, FrameHeader &h, std::size_t max_payload)
{
    DecodeResult r;
    if (in.empty())
        return r; // need_more, needed = 12

    // Judge the first byte at once: a worker that printed a few bytes and then waits for a request would
    // otherwise leave us waiting for a 12-byte header that never comes.
    const auto b0 = static_cast<unsigned char>(in[0]);
    if ((b0 >> 4) != 1)
        return fail("not a frame (worker wrote to stdout?)", in);
    const unsigned words = b0 & 0x0Fu;
    if (words < 3 || words > 3 + max_options)
        return fail("bad frame header: header length of " + std::to_string(words) +
                        " words (3..13 allowed, at most 10 options)",
                    in);

    if (in.size() < header_size)
        return r; // need_more, needed = 12

    const std::uint32_t stored = get_u32(in.data() + 6);
    if (crc32(in.data(), 6) != stored)
        return fail("not a frame (header CRC mismatch; worker wrote to stdout?)", in);

    const std::uint32_t payload = get_u32(in.data() + 2);
    if (payload > max_payload)
        return fail("frame payload of " + std::to_string(payload) + " bytes exceeds the limit of " +
                        std::to_string(max_payload) + " bytes",
                    in.substr(0, header_size));

    const std::size_t head = 4u * words;
    if (in.size() < head) {
        r.needed = head;
        return r;
    }

    h.flags = static_cast<std::uint8_t>(in[1]);
    h.stream = static_cast<std::uint8_t>(in[10]);
    h.payload_size = payload;
    h.option_count = static_cast<std::uint8_t>(words - 3);
    h.options.fill(0);
    for (unsigned i = 0; i < h.option_count; ++i)
        h.options[i] = get_u32(in.data() + header_size + 4u * i);

    r.status = DecodeStatus::ok;
    r.needed = head + payload;
    return r;
}

} // namespace ferry::relay
