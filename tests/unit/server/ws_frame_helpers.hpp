// Helpers of the WebSocket frame tests (ws_frame_test.cpp, ws_frame_close_test.cpp): client frames built
// here, independently of the encoder under test, and a parser fed in pieces with its contract checked on
// every call.
#pragma once

#include "ws/frame.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ws_test {

using namespace ferry::server::detail::ws;

using Key = std::array<std::uint8_t, 4>;
constexpr Key test_key{0x37, 0xFA, 0x21, 0x3D};

inline std::uint8_t op_bits(Opcode op)
{
    return static_cast<std::uint8_t>(op);
}

// A client frame built here, independently of the encoder under test. `b0` is FIN | RSV | opcode;
// `length_bytes` -1 picks the minimal length encoding, else 0, 2 or 8.
inline std::string raw_frame(std::uint8_t b0, std::string_view payload, bool masked = true,
                             int length_bytes = -1, Key key = test_key)
{
    std::string f(1, static_cast<char>(b0));
    const std::uint64_t n = payload.size();
    if (length_bytes < 0)
        length_bytes = n <= 125 ? 0 : n <= 0xFFFF ? 2 : 8;
    const unsigned m = masked ? 0x80 : 0;
    if (length_bytes == 0) {
        f.push_back(static_cast<char>(m | n));
    } else {
        f.push_back(static_cast<char>(m | (length_bytes == 2 ? 126u : 127u)));
        for (int i = length_bytes - 1; i >= 0; --i)
            f.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
    }
    if (masked)
        for (auto k : key)
            f.push_back(static_cast<char>(k));
    for (std::size_t i = 0; i < payload.size(); ++i)
        f.push_back(masked ? static_cast<char>(static_cast<std::uint8_t>(payload[i]) ^ key[i % 4])
                           : payload[i]);
    return f;
}

inline std::string frame(Opcode op, std::string_view payload, bool fin = true)
{
    return raw_frame(static_cast<std::uint8_t>((fin ? 0x80 : 0) | op_bits(op)), payload);
}

// Only a header: the payload is never sent.
inline std::string header_only(std::uint8_t b0, std::uint64_t len)
{
    std::string f(1, static_cast<char>(b0));
    f.push_back(static_cast<char>(0x80 | 127));
    for (int i = 7; i >= 0; --i)
        f.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
    for (auto k : test_key)
        f.push_back(static_cast<char>(k));
    return f;
}

inline std::string close_payload(std::uint16_t code, std::string_view reason = {})
{
    std::string p{static_cast<char>(code >> 8), static_cast<char>(code & 0xFF)};
    return p.append(reason);
}

struct Seen {
    FrameEvent event;
    Opcode type;
    std::string payload;
    std::uint16_t close_code;
    std::string reason;
    std::uint16_t error_code;
};

// Feeds `wire` in pieces ending at each of `cuts` (ascending) and then at its end; stops at the first error.
// Checks the parser's contract on every call.
inline std::vector<Seen> feed(FrameParser &p, const std::string &wire,
                              const std::vector<std::size_t> &cuts = {})
{
    std::vector<Seen> out;
    std::string buf = wire; // parse() unmasks in place
    std::size_t from = 0;
    std::vector<std::size_t> ends = cuts;
    ends.push_back(wire.size());
    for (std::size_t to : ends) {
        std::span<char> in(buf.data() + from, to - from);
        from = to;
        do {
            const Parsed r = p.parse(in);
            EXPECT_LE(r.consumed, in.size());
            if (r.event == FrameEvent::need_more) {
                EXPECT_EQ(r.consumed, in.size());
                break;
            }
            out.push_back({r.event, r.type, std::string(r.payload), r.close_code, std::string(r.close_reason),
                           r.error_code});
            if (r.event == FrameEvent::error) {
                EXPECT_FALSE(r.error.empty());
                return out;
            }
            in = in.subspan(r.consumed);
        } while (!in.empty());
    }
    return out;
}

inline std::vector<Seen> feed_bytewise(FrameParser &p, const std::string &wire)
{
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < wire.size(); ++i)
        cuts.push_back(i);
    return feed(p, wire, cuts);
}

// The error a stream ends with (0 if none).
inline std::uint16_t error_of(const std::string &wire, Limits limits = {})
{
    FrameParser p(limits);
    auto seen = feed(p, wire);
    return !seen.empty() && seen.back().event == FrameEvent::error ? seen.back().error_code : 0;
}

inline std::string pattern(std::size_t n)
{
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i)
        s[i] = static_cast<char>((i * 131 + i / 256) & 0xFF);
    return s;
}

} // namespace ws_test
