// Goridge v3 frames (docs/protocol.md §1): 12-byte header, option words, payload.
#pragma once

#include "ferry/base/text.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::relay {

namespace flag {
inline constexpr std::uint8_t control = 0x01;
inline constexpr std::uint8_t codec_raw = 0x04;
inline constexpr std::uint8_t codec_json = 0x08;
inline constexpr std::uint8_t codec_msgpack = 0x10;
inline constexpr std::uint8_t codec_gob = 0x20;
inline constexpr std::uint8_t error = 0x40;
inline constexpr std::uint8_t codec_proto = 0x80;
} // namespace flag

namespace stream {
inline constexpr std::uint8_t more = 0x01; // STREAM: worker, more frames follow
inline constexpr std::uint8_t stop = 0x02; // server: stop the stream
inline constexpr std::uint8_t ping = 0x04; // worker, during a stream
inline constexpr std::uint8_t pong = 0x08; // server's answer to PING
} // namespace stream

inline constexpr std::size_t header_size = 12;
inline constexpr std::size_t max_options = 10;
inline constexpr std::size_t max_header_size = header_size + 4 * max_options;

struct FrameHeader {
    std::uint8_t flags = 0;
    std::uint8_t stream = 0;
    std::uint32_t payload_size = 0;
    std::uint8_t option_count = 0;
    std::array<std::uint32_t, max_options> options{};

    std::size_t size() const { return header_size + 4u * option_count; } // header + options, bytes
};

// CRC-32 (zlib/IEEE polynomial), as PHP's crc32().
std::uint32_t crc32(const void *data, std::size_t size);

// Writes header + options into `out` (at least max_header_size bytes). Returns the bytes written.
std::size_t encode_header(std::uint8_t *out, std::uint8_t flags, std::uint8_t stream_bits,
                          std::uint32_t payload_size, std::span<const std::uint32_t> options = {});

// A whole frame as one string (control frames, tests).
std::string encode_frame(std::uint8_t flags, std::uint8_t stream_bits, std::span<const std::uint32_t> options,
                         std::string_view payload);

enum class DecodeStatus {
    need_more, // not enough bytes yet; `needed` says how many in total would make progress
    ok,        // header decoded
    error,     // malformed: `error` says why (bad version, CRC mismatch, too many options, oversize...)
};

struct DecodeResult {
    DecodeStatus status = DecodeStatus::need_more;
    std::size_t needed = header_size; // total bytes (from the start of `in`) needed for the next step
    std::string error;
};

// Decodes a frame header (+ options) from the start of `in`, checking version, header length,
// CRC over bytes 0..5, and payload_size <= max_payload. On ok, the whole frame is
// h.size() + h.payload_size bytes; `needed` is set to that total.
// A non-frame (e.g. a stray `echo` on stdout) is reported with its first bytes, printable-escaped.
DecodeResult decode_header(std::string_view in, FrameHeader &h, std::size_t max_payload);

// A frame's bytes in a heap block that can change owner without a copy (a large response body handed from a
// worker's read buffer to the connection that sends it).
struct FrameBuffer {
    std::unique_ptr<char[]> data;
    std::size_t capacity = 0;
};

// Escaping for log lines: ferry::printable() (ferry/base/text.hpp).
using ferry::printable;

} // namespace ferry::relay
