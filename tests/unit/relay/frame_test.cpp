#include "ferry/relay/frame.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace relay = ferry::relay;
using relay::DecodeResult;
using relay::DecodeStatus;
using relay::FrameHeader;

namespace {

std::string from_hex(std::string_view hex)
{
    std::string out;
    int hi = -1;
    for (char c : hex) {
        int v = -1;
        if (c >= '0' && c <= '9')
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        if (v < 0)
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            out += static_cast<char>(hi * 16 + v);
            hi = -1;
        }
    }
    return out;
}

struct Golden {
    const char *name;
    std::uint8_t flags;
    std::uint8_t stream;
    std::vector<std::uint32_t> options;
    std::string payload;
    std::string bytes;
};

// docs/protocol.md §5, verbatim.
std::vector<Golden> goldens()
{
    return {
        {"pid_request",
         0x09,
         0,
         {},
         R"({"pid":1234})",
         from_hex("13 09 0c 00 00 00 5f 0c 46 73 00 00 7b 22 70 69 64 22 3a 31 32 33 34 7d")},
        {"pid_reply",
         0x01,
         0,
         {},
         R"({"pid":5678})",
         from_hex("13 01 0c 00 00 00 9e 47 36 43 00 00 7b 22 70 69 64 22 3a 35 36 37 38 7d")},
        {"stop",
         0x09,
         0,
         {},
         R"({"stop":true})",
         from_hex("13 09 0d 00 00 00 3a 6b fa cb 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d")},
        {"error", 0x40, 0, {}, "boom", from_hex("13 40 04 00 00 00 88 1e 11 e3 00 00 62 6f 6f 6d")},
        {"stop_request",
         0x00,
         0,
         {13},
         R"({"stop":true})",
         from_hex("14 00 0d 00 00 00 f3 39 ef db 00 00 0d 00 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d")},
        {"stream_stop", 0x00, 0x02, {}, "", from_hex("13 00 00 00 00 00 96 d1 80 34 02 00")},
        {"pong", 0x00, 0x08, {}, "", from_hex("13 00 00 00 00 00 96 d1 80 34 08 00")},
    };
}

std::uint32_t le32(const std::string &s, std::size_t at)
{
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i)
        v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
    return v;
}

// A header with a correct CRC for any first byte (version/length nibbles included).
std::string raw_header(std::uint8_t b0, std::uint8_t flags, std::uint32_t payload, std::uint8_t stream = 0)
{
    std::string h(12, '\0');
    h[0] = static_cast<char>(b0);
    h[1] = static_cast<char>(flags);
    for (int i = 0; i < 4; ++i)
        h[2 + i] = static_cast<char>(payload >> (8 * i));
    const std::uint32_t crc = relay::crc32(h.data(), 6);
    for (int i = 0; i < 4; ++i)
        h[6 + i] = static_cast<char>(crc >> (8 * i));
    h[10] = static_cast<char>(stream);
    return h;
}

DecodeResult decode(std::string_view in, FrameHeader &h, std::size_t max_payload = 1 << 20)
{
    return relay::decode_header(in, h, max_payload);
}

} // namespace

TEST(Crc32, KnownVectors)
{
    EXPECT_EQ(relay::crc32("", 0), 0u);
    EXPECT_EQ(relay::crc32("123456789", 9), 0xCBF43926u); // the standard check value
    EXPECT_EQ(relay::crc32("The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
}

TEST(Crc32, GoldenFramesCarryCrcOfBytes0To5)
{
    for (const auto &g : goldens()) {
        SCOPED_TRACE(g.name);
        EXPECT_EQ(relay::crc32(g.bytes.data(), 6), le32(g.bytes, 6));
    }
    EXPECT_EQ(relay::crc32(from_hex("13 09 0c 00 00 00").data(), 6), 0x73460c5fu);
}

TEST(Frame, EncodesGoldenFramesByteForByte)
{
    for (const auto &g : goldens()) {
        SCOPED_TRACE(g.name);
        EXPECT_EQ(relay::encode_frame(g.flags, g.stream, g.options, g.payload), g.bytes);

        std::uint8_t head[relay::max_header_size];
        std::memset(head, 0xAA, sizeof head);
        const std::size_t n = relay::encode_header(head, g.flags, g.stream,
                                                   static_cast<std::uint32_t>(g.payload.size()), g.options);
        ASSERT_EQ(n, 12 + 4 * g.options.size());
        EXPECT_EQ(std::string(reinterpret_cast<const char *>(head), n), g.bytes.substr(0, n));
    }
}

TEST(Frame, DecodesGoldenFrames)
{
    for (const auto &g : goldens()) {
        SCOPED_TRACE(g.name);
        FrameHeader h;
        const DecodeResult r = decode(g.bytes, h);
        ASSERT_EQ(r.status, DecodeStatus::ok) << r.error;
        EXPECT_TRUE(r.error.empty());
        EXPECT_EQ(h.flags, g.flags);
        EXPECT_EQ(h.stream, g.stream);
        EXPECT_EQ(h.payload_size, g.payload.size());
        ASSERT_EQ(h.option_count, g.options.size());
        for (std::size_t i = 0; i < g.options.size(); ++i)
            EXPECT_EQ(h.options[i], g.options[i]);
        for (std::size_t i = g.options.size(); i < relay::max_options; ++i)
            EXPECT_EQ(h.options[i], 0u);
        EXPECT_EQ(h.size(), 12 + 4 * g.options.size());
        EXPECT_EQ(r.needed, g.bytes.size());
        EXPECT_EQ(g.bytes.substr(h.size(), h.payload_size), g.payload);
    }
}

TEST(Frame, GoldenFrameFlagsMatchTheirMeaning)
{
    const auto g = goldens();
    EXPECT_EQ(g[0].flags, relay::flag::control | relay::flag::codec_json);
    EXPECT_EQ(g[1].flags, relay::flag::control);
    EXPECT_EQ(g[3].flags, relay::flag::error);
    EXPECT_EQ(g[5].stream, relay::stream::stop);
    EXPECT_EQ(g[6].stream, relay::stream::pong);
}

TEST(Frame, DecodesEveryGoldenFrameSplitAtEveryByte)
{
    for (const auto &g : goldens()) {
        SCOPED_TRACE(g.name);
        const std::size_t head = 12 + 4 * g.options.size();
        for (std::size_t k = 0; k <= g.bytes.size(); ++k) {
            SCOPED_TRACE(k);
            FrameHeader h;
            const DecodeResult r = decode(std::string_view(g.bytes).substr(0, k), h);
            if (k < 12) {
                EXPECT_EQ(r.status, DecodeStatus::need_more);
                EXPECT_EQ(r.needed, 12u);
            } else if (k < head) {
                EXPECT_EQ(r.status, DecodeStatus::need_more);
                EXPECT_EQ(r.needed, head);
            } else {
                ASSERT_EQ(r.status, DecodeStatus::ok) << r.error;
                EXPECT_EQ(r.needed, g.bytes.size());
                EXPECT_EQ(h.flags, g.flags);
                EXPECT_EQ(h.payload_size, g.payload.size());
            }
            EXPECT_TRUE(r.error.empty());
        }
    }
}

TEST(Frame, ExtraBytesAfterTheFrameAreNotConsumed)
{
    const auto g = goldens();
    const std::string two = g[0].bytes + g[4].bytes;
    FrameHeader h;
    DecodeResult r = decode(two, h);
    ASSERT_EQ(r.status, DecodeStatus::ok);
    ASSERT_EQ(r.needed, g[0].bytes.size());
    r = decode(std::string_view(two).substr(r.needed), h);
    ASSERT_EQ(r.status, DecodeStatus::ok);
    EXPECT_EQ(h.option_count, 1);
    EXPECT_EQ(h.options[0], 13u);
}

TEST(Frame, RoundTripsEveryOptionCount)
{
    for (std::size_t n = 0; n <= relay::max_options; ++n) {
        SCOPED_TRACE(n);
        std::vector<std::uint32_t> opts;
        for (std::size_t i = 0; i < n; ++i)
            opts.push_back(0x01020304u * static_cast<std::uint32_t>(i + 1) + 0xFF000000u);
        const std::string payload(n * 7, 'p');
        const std::string f = relay::encode_frame(0x10, 0x05, opts, payload);
        ASSERT_EQ(f.size(), 12 + 4 * n + payload.size());
        EXPECT_EQ(static_cast<unsigned char>(f[0]), 0x10 + 3 + n);
        FrameHeader h;
        const DecodeResult r = decode(f, h);
        ASSERT_EQ(r.status, DecodeStatus::ok) << r.error;
        EXPECT_EQ(h.flags, 0x10);
        EXPECT_EQ(h.stream, 0x05);
        ASSERT_EQ(h.option_count, n);
        for (std::size_t i = 0; i < n; ++i)
            EXPECT_EQ(h.options[i], opts[i]);
    }
}

TEST(Frame, LargePayloadSizeIsLittleEndian)
{
    std::uint8_t head[relay::max_header_size];
    relay::encode_header(head, 0, 0, 0xA1B2C3D4u);
    EXPECT_EQ(head[2], 0xD4);
    EXPECT_EQ(head[3], 0xC3);
    EXPECT_EQ(head[4], 0xB2);
    EXPECT_EQ(head[5], 0xA1);
    EXPECT_EQ(head[11], 0);
    FrameHeader h;
    const DecodeResult r =
        relay::decode_header(std::string_view(reinterpret_cast<const char *>(head), 12), h, 0xFFFFFFFFu);
    ASSERT_EQ(r.status, DecodeStatus::ok) << r.error;
    EXPECT_EQ(h.payload_size, 0xA1B2C3D4u);
    EXPECT_EQ(r.needed, 12u + 0xA1B2C3D4u);
}

TEST(Frame, EncodeRejectsMoreThanTenOptions)
{
    std::uint8_t head[relay::max_header_size + 4];
    const std::vector<std::uint32_t> eleven(11, 1);
    EXPECT_THROW(relay::encode_header(head, 0, 0, 0, eleven), std::length_error);
    EXPECT_THROW(relay::encode_frame(0, 0, eleven, ""), std::length_error);
}

TEST(FrameMalformed, BadVersionIsRejectedFromTheFirstByte)
{
    for (unsigned v : {0u, 2u, 3u, 7u, 15u}) {
        SCOPED_TRACE(v);
        std::string f = goldens()[0].bytes;
        f[0] = static_cast<char>((v << 4) | 3);
        FrameHeader h;
        for (std::size_t k : {std::size_t{1}, std::size_t{5}, f.size()}) {
            const DecodeResult r = decode(std::string_view(f).substr(0, k), h);
            EXPECT_EQ(r.status, DecodeStatus::error);
            EXPECT_NE(r.error.find("not a frame"), std::string::npos) << r.error;
        }
        // Even with a CRC that matches the bad byte.
        const DecodeResult r = decode(raw_header(static_cast<std::uint8_t>((v << 4) | 3), 0, 0), h);
        EXPECT_EQ(r.status, DecodeStatus::error);
    }
}

TEST(FrameMalformed, BadHeaderLengthIsRejected)
{
    for (unsigned words : {0u, 1u, 2u, 14u, 15u}) {
        SCOPED_TRACE(words);
        const std::string f =
            raw_header(static_cast<std::uint8_t>(0x10 | words), 0, 0) + std::string(60, '\0');
        FrameHeader h;
        DecodeResult r = decode(f, h);
        EXPECT_EQ(r.status, DecodeStatus::error);
        EXPECT_NE(r.error.find("header length"), std::string::npos) << r.error;
        r = decode(std::string_view(f).substr(0, 1), h);
        EXPECT_EQ(r.status, DecodeStatus::error);
    }
}

TEST(FrameMalformed, MoreThanTenOptionsIsRejected)
{
    FrameHeader h;
    std::string ten = raw_header(0x1D, 0, 0) + std::string(40, '\0');
    EXPECT_EQ(decode(ten, h).status, DecodeStatus::ok);
    EXPECT_EQ(h.option_count, 10);
    std::string eleven = raw_header(0x1E, 0, 0) + std::string(44, '\0');
    const DecodeResult r = decode(eleven, h);
    EXPECT_EQ(r.status, DecodeStatus::error);
    EXPECT_NE(r.error.find("at most 10 options"), std::string::npos) << r.error;
}

TEST(FrameMalformed, CrcMismatchOnEveryBitOfBytes0To9)
{
    for (const auto &g : goldens()) {
        for (std::size_t i = 0; i < 10; ++i) {
            for (int bit = 0; bit < 8; ++bit) {
                SCOPED_TRACE(std::string(g.name) + " byte " + std::to_string(i) + " bit " +
                             std::to_string(bit));
                std::string f = g.bytes + std::string(40, '\0');
                f[i] = static_cast<char>(f[i] ^ (1 << bit));
                FrameHeader h;
                const DecodeResult r = decode(f, h, 0xFFFFFFFFu);
                EXPECT_EQ(r.status, DecodeStatus::error);
                EXPECT_FALSE(r.error.empty());
                const auto b0 = static_cast<unsigned char>(f[0]);
                const unsigned words = b0 & 0x0F;
                if ((b0 >> 4) == 1 && words >= 3 && words <= 13) {
                    EXPECT_NE(r.error.find("CRC mismatch"), std::string::npos) << r.error;
                }
            }
        }
    }
}

TEST(FrameMalformed, CrcMismatchReportsTheBytes)
{
    std::string f = goldens()[0].bytes;
    f[2] = 0x0d;
    FrameHeader h;
    const DecodeResult r = decode(f, h);
    ASSERT_EQ(r.status, DecodeStatus::error);
    EXPECT_NE(r.error.find(R"("\x13\t\r\x00\x00\x00_\x0cFs\x00\x00{\"pid\":1234}")"), std::string::npos)
        << r.error;
}

TEST(FrameMalformed, OversizePayloadIsRejected)
{
    const std::string at_limit = raw_header(0x13, 0, 1000);
    FrameHeader h;
    DecodeResult r = relay::decode_header(at_limit, h, 1000);
    EXPECT_EQ(r.status, DecodeStatus::ok) << r.error;
    EXPECT_EQ(r.needed, 1012u);

    r = relay::decode_header(raw_header(0x13, 0, 1001), h, 1000);
    EXPECT_EQ(r.status, DecodeStatus::error);
    EXPECT_NE(r.error.find("1001"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("1000"), std::string::npos) << r.error;

    r = relay::decode_header(goldens()[3].bytes, h, 3); // "boom" is 4 bytes
    EXPECT_EQ(r.status, DecodeStatus::error);
    r = relay::decode_header(goldens()[3].bytes, h, 0);
    EXPECT_EQ(r.status, DecodeStatus::error);
    r = relay::decode_header(goldens()[5].bytes, h, 0); // empty payload fits a zero limit
    EXPECT_EQ(r.status, DecodeStatus::ok);
}

TEST(FrameMalformed, StrayEchoIsReportedWithItsBytes)
{
    FrameHeader h;
    DecodeResult r = decode("Could not open input file: x.php\n", h);
    ASSERT_EQ(r.status, DecodeStatus::error);
    EXPECT_EQ(r.error, R"(not a frame (worker wrote to stdout?): "Could not open input file: x.php\n")");

    r = decode("PHP Warning:  Undefined variable $x in /app/worker.php on line 3\n"
               "PHP Warning:  Undefined variable $y in /app/worker.php on line 4\n",
               h);
    ASSERT_EQ(r.status, DecodeStatus::error);
    EXPECT_NE(r.error.find(R"("PHP Warning:  Undefined variable $x in /app/worker.php on line 3\nPHP)"),
              std::string::npos)
        << r.error;
    EXPECT_NE(r.error.find("line 4\\n\""), std::string::npos) << r.error;

    r = decode(std::string(1000, 'A'), h);
    ASSERT_EQ(r.status, DecodeStatus::error);
    EXPECT_NE(r.error.find(": \"" + std::string(256, 'A') + "...\""), std::string::npos) << r.error; // cut

    r = decode("x", h); // a short echo is reported at once instead of waiting for 12 bytes
    ASSERT_EQ(r.status, DecodeStatus::error);
    EXPECT_EQ(r.error, R"(not a frame (worker wrote to stdout?): "x")");

    // Text that happens to start with a plausible header byte fails the CRC.
    r = decode("\x13hello, world! again", h);
    ASSERT_EQ(r.status, DecodeStatus::error);
    EXPECT_NE(r.error.find(R"("\x13hello, world! again")"), std::string::npos) << r.error;
}

TEST(Printable, EscapesNonPrintableBytes)
{
    EXPECT_EQ(relay::printable("abc XYZ ~"), "abc XYZ ~");
    EXPECT_EQ(relay::printable(std::string_view("a\0b", 3)), "a\\x00b");
    EXPECT_EQ(relay::printable("\n\r\t\\\""), "\\n\\r\\t\\\\\\\"");
    EXPECT_EQ(relay::printable("\x7f\x80\xff\x1b"), "\\x7f\\x80\\xff\\x1b");
    EXPECT_EQ(relay::printable("abcdef", 3), "abc...");
    EXPECT_EQ(relay::printable("abc", 3), "abc");
    EXPECT_EQ(relay::printable(""), "");
    EXPECT_EQ(relay::printable(std::string(100, 'a')).size(), 64u + 3u);
}
