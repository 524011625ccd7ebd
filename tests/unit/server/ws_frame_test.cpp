#include "ws/frame.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace ferry::server::detail::ws;

namespace {

using Key = std::array<std::uint8_t, 4>;
constexpr Key test_key{0x37, 0xFA, 0x21, 0x3D};

std::uint8_t op_bits(Opcode op)
{
    return static_cast<std::uint8_t>(op);
}

// A client frame built here, independently of the encoder under test. `b0` is FIN | RSV | opcode;
// `length_bytes` -1 picks the minimal length encoding, else 0, 2 or 8.
std::string raw_frame(std::uint8_t b0, std::string_view payload, bool masked = true, int length_bytes = -1,
                      Key key = test_key)
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

std::string frame(Opcode op, std::string_view payload, bool fin = true)
{
    return raw_frame(static_cast<std::uint8_t>((fin ? 0x80 : 0) | op_bits(op)), payload);
}

// Only a header: the payload is never sent.
std::string header_only(std::uint8_t b0, std::uint64_t len)
{
    std::string f(1, static_cast<char>(b0));
    f.push_back(static_cast<char>(0x80 | 127));
    for (int i = 7; i >= 0; --i)
        f.push_back(static_cast<char>((len >> (8 * i)) & 0xFF));
    for (auto k : test_key)
        f.push_back(static_cast<char>(k));
    return f;
}

std::string close_payload(std::uint16_t code, std::string_view reason = {})
{
    std::string p{static_cast<char>(code >> 8), static_cast<char>(code & 0xFF)};
    return p.append(reason);
}

struct Seen {
    Event event;
    Opcode type;
    std::string payload;
    std::uint16_t close_code;
    std::string reason;
    std::uint16_t error_code;
};

// Feeds `wire` in pieces ending at each of `cuts` (ascending) and then at its end; stops at the first error.
// Checks the parser's contract on every call.
std::vector<Seen> feed(FrameParser &p, const std::string &wire, const std::vector<std::size_t> &cuts = {})
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
            if (r.event == Event::need_more) {
                EXPECT_EQ(r.consumed, in.size());
                break;
            }
            out.push_back({r.event, r.type, std::string(r.payload), r.close_code, std::string(r.close_reason),
                           r.error_code});
            if (r.event == Event::error) {
                EXPECT_FALSE(r.error.empty());
                return out;
            }
            in = in.subspan(r.consumed);
        } while (!in.empty());
    }
    return out;
}

std::vector<Seen> feed_bytewise(FrameParser &p, const std::string &wire)
{
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < wire.size(); ++i)
        cuts.push_back(i);
    return feed(p, wire, cuts);
}

// The error a stream ends with (0 if none).
std::uint16_t error_of(const std::string &wire, Limits limits = {})
{
    FrameParser p(limits);
    auto seen = feed(p, wire);
    return !seen.empty() && seen.back().event == Event::error ? seen.back().error_code : 0;
}

std::string pattern(std::size_t n)
{
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i)
        s[i] = static_cast<char>((i * 131 + i / 256) & 0xFF);
    return s;
}

} // namespace

// ---------------------------------------------------------------------------------------------- UTF-8

namespace {

// Straightforward RFC 3629 check, written independently of the DFA.
bool reference_utf8(const std::vector<std::uint8_t> &s)
{
    std::size_t i = 0;
    while (i < s.size()) {
        const std::uint8_t b = s[i];
        std::size_t n;
        std::uint32_t cp;
        if (b < 0x80) {
            ++i;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            n = 1, cp = b & 0x1Fu;
        } else if ((b & 0xF0) == 0xE0) {
            n = 2, cp = b & 0x0Fu;
        } else if ((b & 0xF8) == 0xF0) {
            n = 3, cp = b & 0x07u;
        } else {
            return false;
        }
        if (i + n >= s.size()) // the sequence is cut short
            return false;
        for (std::size_t k = 1; k <= n; ++k) {
            if ((s[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        const std::uint32_t min = n == 1 ? 0x80 : n == 2 ? 0x800 : 0x10000;
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n + 1;
    }
    return true;
}

bool dfa_utf8(const std::vector<std::uint8_t> &s)
{
    return valid_utf8(std::string_view(reinterpret_cast<const char *>(s.data()), s.size()));
}

} // namespace

TEST(Utf8Validator, AcceptsBoundaryCodePointsWholeAndBytewise)
{
    const std::string samples[] = {
        "",
        "plain ascii, longer than eight bytes",
        "\xC2\x80",         // U+0080
        "\xDF\xBF",         // U+07FF
        "\xE0\xA0\x80",     // U+0800
        "\xED\x9F\xBF",     // U+D7FF
        "\xEE\x80\x80",     // U+E000
        "\xEF\xBF\xBF",     // U+FFFF
        "\xF0\x90\x80\x80", // U+10000
        "\xF4\x8F\xBF\xBF", // U+10FFFF
        "h\xC3\xA9llo w\xC3\xB6rld \xE2\x82\xAC \xF0\x9F\x98\x80 and more ascii text here",
    };
    for (const auto &s : samples) {
        EXPECT_TRUE(valid_utf8(s)) << s;
        Utf8Validator v;
        for (std::size_t i = 0; i < s.size(); ++i) {
            ASSERT_TRUE(v.feed(s.substr(i, 1))) << s << " at " << i;
            // Complete exactly when the next byte would start a new code point.
            const bool boundary = i + 1 == s.size() || (static_cast<std::uint8_t>(s[i + 1]) & 0xC0) != 0x80;
            EXPECT_EQ(v.complete(), boundary) << s << " at " << i;
        }
        EXPECT_TRUE(v.complete());
    }
}

TEST(Utf8Validator, FailsAtTheFirstImpossibleByte)
{
    struct Case {
        std::string bytes;
        std::size_t fails_at;
    };
    const Case cases[] = {
        {"\xC0\x80", 0},         // overlong lead, refused at once
        {"\xC1\xBF", 0},         //
        {"\xF5\x80\x80\x80", 0}, // above U+10FFFF by its lead
        {"\xFF", 0},             //
        {"\x80", 0},             // lone continuation
        {"ab\xBF", 2},           //
        {"\xED\xA0\x80", 1},     // U+D800 surrogate, at the second byte
        {"\xED\xBF\xBF", 1},     // U+DFFF
        {"\xF4\x90\x80\x80", 1}, // U+110000, at the second byte
        {"\xE0\x80\x80", 1},     // overlong 3-byte
        {"\xE0\x9F\xBF", 1},     //
        {"\xF0\x80\x80\x80", 1}, // overlong 4-byte
        {"\xF0\x8F\xBF\xBF", 1}, //
        {"\xC2\x41", 1},         // a sequence cut by ASCII
        {"\xE1\x80\x41", 2},     //
        {"\xF1\x80\x80\xC0", 3}, //
        {"abcdefgh\xC0", 8},     // right after the 8-byte ASCII fast path
        {"abcdefghijklmno\xF8", 15},
    };
    for (const auto &c : cases) {
        Utf8Validator v;
        for (std::size_t i = 0; i < c.bytes.size(); ++i) {
            const bool ok = v.feed(c.bytes.substr(i, 1));
            EXPECT_EQ(ok, i < c.fails_at) << testing::PrintToString(c.bytes) << " byte " << i;
            if (!ok)
                break;
        }
        EXPECT_TRUE(v.failed());
        EXPECT_FALSE(v.feed("a")) << "stays failed";
        EXPECT_FALSE(v.complete());
        v.reset();
        EXPECT_TRUE(v.feed("a"));
        EXPECT_TRUE(v.complete());
        EXPECT_FALSE(valid_utf8(c.bytes));
    }
}

TEST(Utf8Validator, SequenceSplitAcrossFeeds)
{
    Utf8Validator v;
    EXPECT_TRUE(v.feed("abc\xF0\x9F"));
    EXPECT_FALSE(v.complete());
    EXPECT_TRUE(v.feed("\x98"));
    EXPECT_FALSE(v.complete());
    EXPECT_TRUE(v.feed("\x80xyz\xE2"));
    EXPECT_FALSE(v.complete()); // a message ending here is invalid
    EXPECT_TRUE(v.feed("\x82\xAC"));
    EXPECT_TRUE(v.complete());
    EXPECT_TRUE(v.feed("\xED"));
    EXPECT_FALSE(v.feed("\xA0")); // a surrogate, found across the feeds
    EXPECT_TRUE(v.failed());
}

TEST(Utf8Validator, AgreesWithAReferenceOnEveryShortSequence)
{
    // All 1- and 2-byte strings, 3- and 4-byte ones with every lead and second byte and the interesting
    // values after them.
    const std::uint8_t tails[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xFF};
    std::size_t checked = 0;
    for (unsigned a = 0; a < 256; ++a) {
        const auto b0 = static_cast<std::uint8_t>(a);
        ASSERT_EQ(dfa_utf8({b0}), reference_utf8({b0})) << a;
        for (unsigned b = 0; b < 256; ++b) {
            const auto b1 = static_cast<std::uint8_t>(b);
            ASSERT_EQ(dfa_utf8({b0, b1}), reference_utf8({b0, b1})) << a << ' ' << b;
            if (a < 0xE0)
                continue;
            for (auto b2 : tails) {
                ASSERT_EQ(dfa_utf8({b0, b1, b2}), reference_utf8({b0, b1, b2}))
                    << a << ' ' << b << ' ' << +b2;
                for (auto b3 : tails) {
                    ASSERT_EQ(dfa_utf8({b0, b1, b2, b3}), reference_utf8({b0, b1, b2, b3}))
                        << a << ' ' << b << ' ' << +b2 << ' ' << +b3;
                    ++checked;
                }
            }
        }
    }
    EXPECT_GT(checked, 1000000u);
}

// --------------------------------------------------------------------------------------------- frames

TEST(WsFrame, SingleFramesWholeAndSplitAtEveryByte)
{
#if defined(__SANITIZE_ADDRESS__)
    constexpr std::size_t middle_stride = 7;
#else
    constexpr std::size_t middle_stride = 1;
#endif
    for (std::size_t size : {0u, 1u, 125u, 126u, 65535u, 65536u}) {
        SCOPED_TRACE(size);
        const std::string payload = pattern(size);
        const std::string wire = frame(Opcode::binary, payload);
        const std::size_t header = size <= 125 ? 6 : size <= 65535 ? 8 : 14;
        ASSERT_EQ(wire.size(), header + size);

        // Whole: a view into the caller's buffer, unmasked in place, nothing held.
        {
            FrameParser p;
            std::string buf = wire;
            const Parsed r = p.parse(buf);
            ASSERT_EQ(r.event, Event::message);
            EXPECT_EQ(r.type, Opcode::binary);
            EXPECT_EQ(r.consumed, wire.size());
            EXPECT_EQ(r.payload, payload);
            EXPECT_EQ(r.payload.data(), buf.data() + header);
            EXPECT_EQ(p.memory(), 0u);
        }
        // In two pieces, cut at every byte. Under the sanitizers (-O0, ~10x slower) the middle of a 64 KiB
        // payload is cut at every 7th byte only, which still meets every mask and word phase.
        FrameParser p;
        auto near_edge = [&](std::size_t c) { return c < 300 || c + 300 > wire.size(); };
        for (std::size_t cut = 0; cut <= wire.size(); cut += near_edge(cut) ? 1 : middle_stride) {
            auto seen = feed(p, wire, {cut});
            ASSERT_EQ(seen.size(), 1u) << cut;
            ASSERT_EQ(seen[0].event, Event::message) << cut;
            ASSERT_EQ(seen[0].type, Opcode::binary);
            ASSERT_TRUE(seen[0].payload == payload) << cut;
        }
        // One byte at a time (every boundary at once).
        auto seen = feed_bytewise(p, wire);
        ASSERT_EQ(seen.size(), 1u);
        EXPECT_TRUE(seen[0].payload == payload);
        EXPECT_FALSE(p.failed());
    }
}

TEST(WsFrame, TextPingPongAndTwoFramesInOneRead)
{
    const std::string wire = frame(Opcode::text, "h\xC3\xA9llo") + frame(Opcode::ping, "are you there") +
                             frame(Opcode::pong, "") + frame(Opcode::text, "");
    FrameParser p;
    std::string buf = wire;
    std::span<char> in(buf);
    Parsed r = p.parse(in);
    ASSERT_EQ(r.event, Event::message);
    EXPECT_EQ(r.type, Opcode::text);
    EXPECT_EQ(r.payload, "h\xC3\xA9llo");
    EXPECT_EQ(r.consumed, 6u + 6u);
    in = in.subspan(r.consumed);
    r = p.parse(in);
    ASSERT_EQ(r.event, Event::ping);
    EXPECT_EQ(r.payload, "are you there");
    in = in.subspan(r.consumed);
    r = p.parse(in);
    ASSERT_EQ(r.event, Event::pong);
    EXPECT_EQ(r.payload, "");
    in = in.subspan(r.consumed);
    r = p.parse(in);
    ASSERT_EQ(r.event, Event::message);
    EXPECT_EQ(r.payload, "");
    EXPECT_EQ(r.consumed, in.size());
    r = p.parse(in.subspan(r.consumed));
    EXPECT_EQ(r.event, Event::need_more);
    EXPECT_EQ(r.consumed, 0u);
}

TEST(WsFrame, HeaderInOneReadPayloadInTheNextIsStillNotCopied)
{
    const std::string wire = frame(Opcode::text, std::string(300, 't'));
    FrameParser p;
    std::string head = wire.substr(0, 8), body = wire.substr(8);
    Parsed r = p.parse(head);
    ASSERT_EQ(r.event, Event::need_more);
    EXPECT_EQ(r.consumed, 8u);
    r = p.parse(body);
    ASSERT_EQ(r.event, Event::message);
    EXPECT_EQ(r.payload, std::string(300, 't'));
    EXPECT_EQ(r.payload.data(), body.data());
    EXPECT_EQ(p.memory(), 0u);
}

TEST(WsFrame, NonMinimalLengthEncodingsAreAccepted)
{
    for (int length_bytes : {2, 8}) {
        FrameParser p;
        auto seen = feed(p, raw_frame(0x82, "abcde", true, length_bytes));
        ASSERT_EQ(seen.size(), 1u);
        EXPECT_EQ(seen[0].event, Event::message);
        EXPECT_EQ(seen[0].payload, "abcde");
    }
}

TEST(WsFrame, FragmentedTextWithPingBetweenReassembledAtEveryCut)
{
    // "é" and "€" are split across fragments; a ping sits between the fragments.
    const std::string wire = frame(Opcode::text, "Hello, w\xC3", false) + frame(Opcode::ping, "p1") +
                             frame(Opcode::continuation, "\xA9rld \xE2\x82", false) +
                             frame(Opcode::continuation, "\xAC!", true) + frame(Opcode::text, "next");
    const std::string message = "Hello, w\xC3\xA9rld \xE2\x82\xAC!";
    auto check = [&](const std::vector<Seen> &seen, const std::string &where) {
        ASSERT_EQ(seen.size(), 3u) << where;
        EXPECT_EQ(seen[0].event, Event::ping) << where;
        EXPECT_EQ(seen[0].payload, "p1") << where;
        EXPECT_EQ(seen[1].event, Event::message) << where;
        EXPECT_EQ(seen[1].type, Opcode::text) << where;
        EXPECT_EQ(seen[1].payload, message) << where;
        EXPECT_EQ(seen[2].payload, "next") << where;
    };
    FrameParser p;
    check(feed(p, wire), "whole");
    for (std::size_t i = 0; i <= wire.size(); ++i)
        for (std::size_t j = i; j <= wire.size(); ++j)
            check(feed(p, wire, {i, j}), std::to_string(i) + "," + std::to_string(j));
    check(feed_bytewise(p, wire), "bytewise");
    EXPECT_FALSE(p.in_message());
}

TEST(WsFrame, ControlFramesBetweenFragmentsAndBinaryFragments)
{
    const std::string wire = frame(Opcode::binary, "\xFF\xFE", false) + frame(Opcode::pong, "x") +
                             frame(Opcode::continuation, "", false) +
                             frame(Opcode::close, close_payload(1000, "bye")) +
                             frame(Opcode::continuation, "\xC0", true);
    FrameParser p;
    auto seen = feed(p, wire);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].event, Event::pong);
    EXPECT_EQ(seen[1].event, Event::close);
    EXPECT_EQ(seen[1].close_code, 1000);
    EXPECT_EQ(seen[1].reason, "bye");
    EXPECT_EQ(seen[2].event, Event::message);
    EXPECT_EQ(seen[2].type, Opcode::binary);
    EXPECT_EQ(seen[2].payload, "\xFF\xFE\xC0"); // binary is not UTF-8 checked
}

TEST(WsFrame, InvalidUtf8TextIs1007)
{
    for (std::string bad :
         {"\xC0\x80", "ok \xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5", "\x80", "trunc \xE2\x82"}) {
        SCOPED_TRACE(testing::PrintToString(bad));
        EXPECT_EQ(error_of(frame(Opcode::text, bad)), 1007);
        // Split across fragments.
        const std::string head = bad.substr(0, bad.size() / 2), tail = bad.substr(bad.size() / 2);
        EXPECT_EQ(error_of(frame(Opcode::text, head, false) + frame(Opcode::continuation, tail)), 1007);
        // Binary: no check.
        EXPECT_EQ(error_of(frame(Opcode::binary, bad)), 0);
    }
    // A fragment may end inside a sequence; only the message's end may not.
    EXPECT_EQ(error_of(frame(Opcode::text, "\xE2", false) + frame(Opcode::continuation, "\x82", false) +
                       frame(Opcode::continuation, "\xAC")),
              0);
    EXPECT_EQ(error_of(frame(Opcode::text, "\xE2", false) + frame(Opcode::continuation, "\x82", false) +
                       frame(Opcode::continuation, "")),
              1007);
}

TEST(WsFrame, InvalidUtf8FailsBeforeTheRestOfTheFrameArrives)
{
    const std::string wire = frame(Opcode::text, "abc\xED\xA0" + std::string(1000, 'x'));
    FrameParser p;
    std::string buf = wire.substr(0, 8 + 5); // header (8) and "abc\xED\xA0"
    const Parsed r = p.parse(buf);
    ASSERT_EQ(r.event, Event::error);
    EXPECT_EQ(r.error_code, 1007);
    EXPECT_EQ(p.memory(), 0u);
    // A fragmented one: the second fragment's first bad byte.
    FrameParser q;
    std::string frag = frame(Opcode::text, "ok", false) + frame(Opcode::continuation, "\xF4\x90", false);
    auto seen = feed(q, frag.substr(0, frag.size() - 1), {});
    EXPECT_TRUE(seen.empty());
    seen = feed(q, frag.substr(frag.size() - 1));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].error_code, 1007);
}

TEST(WsFrame, ProtocolErrorsAre1002)
{
    EXPECT_EQ(error_of(raw_frame(0x81, "hi", false)), 1002) << "unmasked";
    for (int rsv : {0x40, 0x20, 0x10, 0x70})
        EXPECT_EQ(error_of(raw_frame(static_cast<std::uint8_t>(0x81 | rsv), "hi")), 1002) << rsv;
    for (int op : {3, 4, 5, 6, 7, 11, 12, 13, 14, 15})
        EXPECT_EQ(error_of(raw_frame(static_cast<std::uint8_t>(0x80 | op), "")), 1002) << op;
    EXPECT_EQ(error_of(frame(Opcode::ping, std::string(126, 'p'))), 1002) << "long ping";
    EXPECT_EQ(error_of(frame(Opcode::close, std::string(126, 'p'))), 1002) << "long close";
    EXPECT_EQ(error_of(frame(Opcode::ping, std::string(125, 'p'))), 0);
    EXPECT_EQ(error_of(frame(Opcode::ping, "x", false)), 1002) << "fragmented ping";
    EXPECT_EQ(error_of(frame(Opcode::pong, "x", false)), 1002) << "fragmented pong";
    EXPECT_EQ(error_of(frame(Opcode::continuation, "x")), 1002) << "continuation without start";
    EXPECT_EQ(error_of(frame(Opcode::text, "a") + frame(Opcode::continuation, "x")), 1002);
    EXPECT_EQ(error_of(frame(Opcode::text, "a", false) + frame(Opcode::text, "b")), 1002)
        << "text in message";
    EXPECT_EQ(error_of(frame(Opcode::binary, "a", false) + frame(Opcode::binary, "b")), 1002);
    EXPECT_EQ(error_of(header_only(0x82, std::uint64_t{1} << 63)), 1002) << "64-bit length MSB";
}

TEST(WsFrame, ProtocolErrorsFailAtTheOffendingHeaderByte)
{
    // Each prefix is fed whole; the error comes at its last byte.
    for (const std::string &prefix :
         {std::string("\x83"), std::string("\xC1"), std::string("\x09"), std::string("\x00", 1),
          std::string("\x81\x05"), std::string("\x89\xFE"), std::string("\x82\xFF\x80")}) {
        FrameParser p;
        std::string buf = prefix;
        const Parsed r = p.parse(buf);
        ASSERT_EQ(r.event, Event::error) << testing::PrintToString(prefix);
        EXPECT_EQ(r.error_code, 1002);
        EXPECT_EQ(r.consumed, prefix.size());
        // Sticky: the same error, nothing consumed.
        std::string more = frame(Opcode::text, "x");
        const Parsed again = p.parse(more);
        EXPECT_EQ(again.event, Event::error);
        EXPECT_EQ(again.error_code, 1002);
        EXPECT_EQ(again.consumed, 0u);
        EXPECT_TRUE(p.failed());
    }
}

TEST(WsFrame, Rsv1OnlyWithDeflateAndOnlyOnAMessagesFirstFrame)
{
    Limits deflate;
    deflate.allow_rsv1 = true;
    FrameParser p(deflate);
    auto seen = feed(p, raw_frame(0xC1, "\xC0\x80 compressed bytes"));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].event, Event::message);
    EXPECT_EQ(seen[0].type, Opcode::text);
    EXPECT_EQ(error_of(raw_frame(0x41, "a") + raw_frame(0xC0, "b"), deflate), 1002) << "RSV1 on continuation";
    EXPECT_EQ(error_of(raw_frame(0xC9, ""), deflate), 1002) << "RSV1 on ping";
    EXPECT_EQ(error_of(raw_frame(0xA1, ""), deflate), 1002) << "RSV2 still refused";
    FrameParser q(deflate);
    std::string buf = raw_frame(0xC2, "z");
    const Parsed r = q.parse(buf);
    EXPECT_TRUE(r.compressed);
}

TEST(WsFrame, TooBigIs1009BeforeThePayloadIsRead)
{
    Limits small;
    small.max_message = 1000;
    EXPECT_EQ(error_of(frame(Opcode::binary, std::string(1000, 'a')), small), 0);
    {
        // Only the header is sent: the error comes from the declared length, before the mask key.
        FrameParser p(small);
        std::string wire = frame(Opcode::binary, std::string(1001, 'a'));
        std::string buf = wire.substr(0, 4);
        const Parsed r = p.parse(buf);
        ASSERT_EQ(r.event, Event::error);
        EXPECT_EQ(r.error_code, 1009);
        EXPECT_EQ(p.memory(), 0u);
    }
    {
        FrameParser p; // default 16 MiB
        std::string buf = header_only(0x82, std::uint64_t{1} << 40);
        const Parsed r = p.parse(buf);
        ASSERT_EQ(r.event, Event::error);
        EXPECT_EQ(r.error_code, 1009);
        EXPECT_EQ(p.memory(), 0u);
    }
    {
        // By fragments: 600 bytes held, the next fragment announces 500 more.
        FrameParser p(small);
        auto seen = feed(p, frame(Opcode::binary, std::string(600, 'a'), false) + frame(Opcode::ping, "") +
                                header_only(0x00, 500));
        ASSERT_EQ(seen.size(), 2u);
        EXPECT_EQ(seen[1].event, Event::error);
        EXPECT_EQ(seen[1].error_code, 1009);
        EXPECT_LT(p.memory(), 2048u);
        EXPECT_EQ(error_of(frame(Opcode::text, std::string(600, 'a'), false) +
                               frame(Opcode::continuation, std::string(400, 'b')),
                           small),
                  0);
    }
}

TEST(WsFrame, CloseFrames)
{
    {
        FrameParser p;
        auto seen = feed(p, frame(Opcode::close, ""));
        ASSERT_EQ(seen.size(), 1u);
        EXPECT_EQ(seen[0].event, Event::close);
        EXPECT_EQ(seen[0].close_code, close_status::no_status);
    }
    EXPECT_EQ(error_of(frame(Opcode::close, "\x03")), 1002) << "1-byte payload";
    const std::uint16_t invalid[] = {0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535};
    for (std::uint16_t code : invalid)
        EXPECT_EQ(error_of(frame(Opcode::close, close_payload(code))), 1002) << code;
    const std::uint16_t valid[] = {1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010,
                                   1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999};
    const std::string reason = std::string("r\xC3\xA9") + "ason";
    for (std::uint16_t code : valid) {
        FrameParser p;
        auto seen = feed_bytewise(p, frame(Opcode::close, close_payload(code, reason)));
        ASSERT_EQ(seen.size(), 1u) << code;
        EXPECT_EQ(seen[0].event, Event::close);
        EXPECT_EQ(seen[0].close_code, code);
        EXPECT_EQ(seen[0].reason, reason);
        EXPECT_EQ(seen[0].payload, close_payload(code, reason));
    }
    EXPECT_EQ(error_of(frame(Opcode::close, close_payload(1000, "bad \xED\xA0\x80"))), 1007);
    EXPECT_EQ(error_of(frame(Opcode::close, close_payload(1000, "cut \xE2\x82"))), 1007);
    // An open text message's UTF-8 state is not disturbed by a close reason between its fragments.
    FrameParser p;
    auto seen = feed(p, frame(Opcode::text, "\xE2", false) + frame(Opcode::close, close_payload(1001, "ok")) +
                            frame(Opcode::continuation, "\x82\xAC"));
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[1].payload, "\xE2\x82\xAC");
}

TEST(WsFrame, ValidCloseCodes)
{
    int valid = 0;
    for (unsigned c = 0; c <= 0xFFFF; ++c)
        valid += valid_close_code(static_cast<std::uint16_t>(c)) ? 1 : 0;
    EXPECT_EQ(valid, 4 + 8 + 2000);
    EXPECT_TRUE(valid_close_code(close_status::try_again_later));
    EXPECT_FALSE(valid_close_code(close_status::no_status));
    EXPECT_FALSE(valid_close_code(close_status::abnormal));
}

TEST(WsFrame, EncodeHeaderIsByteExact)
{
    struct Case {
        std::uint64_t len;
        std::vector<std::uint8_t> bytes;
    };
    const Case cases[] = {
        {0, {0x82, 0x00}},
        {125, {0x82, 0x7D}},
        {126, {0x82, 0x7E, 0x00, 0x7E}},
        {65535, {0x82, 0x7E, 0xFF, 0xFF}},
        {65536, {0x82, 0x7F, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00}},
        {std::uint64_t{1} << 32, {0x82, 0x7F, 0, 0, 0, 0x01, 0, 0, 0, 0}},
    };
    for (const auto &c : cases) {
        std::uint8_t out[10];
        const std::size_t n = encode_header(out, Opcode::binary, c.len);
        EXPECT_EQ(std::vector<std::uint8_t>(out, out + n), c.bytes) << c.len;
    }
    std::uint8_t out[10];
    ASSERT_EQ(encode_header(out, Opcode::text, 5, false), 2u);
    EXPECT_EQ(out[0], 0x01);
    ASSERT_EQ(encode_header(out, Opcode::continuation, 5, true), 2u);
    EXPECT_EQ(out[0], 0x80);
    EXPECT_EQ(encode_frame(Opcode::text, "hi"), std::string("\x81\x02hi"));
    EXPECT_EQ(encode_frame(Opcode::pong, ""), std::string("\x8A\x00", 2));
    const std::string big = encode_frame(Opcode::binary, std::string(300, 'z'));
    EXPECT_EQ(big.substr(0, 4), std::string("\x82\x7E\x01\x2C"));
    EXPECT_EQ(big.size(), 304u);
}

TEST(WsFrame, EncodeClose)
{
    EXPECT_EQ(encode_close(1000, "bye"), std::string("\x88\x05\x03\xE8") + "bye");
    EXPECT_EQ(encode_close(close_status::too_big), std::string("\x88\x02\x03\xF1"));
    EXPECT_EQ(encode_close(close_status::no_status, "ignored"), std::string("\x88\x00", 2));
    // ASCII: cut at 123 reason bytes.
    std::string f = encode_close(1001, std::string(200, 'a'));
    EXPECT_EQ(f.size(), 2u + 125u);
    EXPECT_EQ(static_cast<std::uint8_t>(f[1]), 125);
    // A 3-byte "€" straddling the limit is dropped whole.
    f = encode_close(1001, std::string(122, 'a') + "\xE2\x82\xAC" + "tail");
    EXPECT_EQ(f.size(), 2u + 2u + 122u);
    // Every length of a mixed-width reason: at most 125 bytes, valid UTF-8, the longest such prefix.
    const std::string unit = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"; // 1+2+3+4 bytes
    std::string reason;
    for (int i = 0; i < 20; ++i) {
        reason += unit;
        f = encode_close(4000, reason);
        const std::string_view r = std::string_view(f).substr(4);
        EXPECT_LE(f.size() - 2, 125u);
        EXPECT_TRUE(valid_utf8(r));
        EXPECT_EQ(reason.compare(0, r.size(), r), 0);
        if (r.size() < reason.size()) {
            EXPECT_GT(r.size(), 123u - 4u);
        }
    }
    // What we send, a client parser (ours, once masked) reads back.
    FrameParser p;
    auto seen = feed(p, raw_frame(0x88, std::string_view(f).substr(2)));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].close_code, 4000);
}

TEST(WsFrame, MemoryIsHeldOnlyWhileNeeded)
{
    // A large message split across reads is reassembled, then freed on the next call.
    const std::string payload = pattern(200 << 10);
    const std::string wire = frame(Opcode::binary, payload) + frame(Opcode::ping, "");
    FrameParser p;
    std::string buf = wire;
    std::span<char> in(buf);
    Parsed r = p.parse(in.subspan(0, 5000));
    ASSERT_EQ(r.event, Event::need_more);
    EXPECT_GT(p.memory(), 0u);
    EXPECT_LT(p.memory(), 20000u) << "grows with what arrives, not with the declared length";
    r = p.parse(in.subspan(5000));
    ASSERT_EQ(r.event, Event::message);
    EXPECT_TRUE(r.payload == payload);
    EXPECT_GE(p.memory(), payload.size());
    r = p.parse(in.subspan(5000 + r.consumed));
    ASSERT_EQ(r.event, Event::ping);
    EXPECT_EQ(p.memory(), 0u);

    // A small one keeps its buffer for the next message until release_memory().
    FrameParser q;
    auto seen = feed(q, frame(Opcode::text, std::string(2000, 'x')), {1000});
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_GT(q.memory(), 0u);
    EXPECT_LE(q.memory(), 64u << 10);
    q.release_memory();
    EXPECT_EQ(q.memory(), 0u);

    // release_memory() in the middle of a message keeps its bytes.
    FrameParser m;
    const std::string msg =
        frame(Opcode::text, std::string(3000, 'y'), false) + frame(Opcode::continuation, "z");
    EXPECT_TRUE(feed(m, msg.substr(0, 2000)).empty());
    m.release_memory();
    EXPECT_GT(m.memory(), 0u);
    seen = feed(m, msg.substr(2000));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].payload, std::string(3000, 'y') + "z");

    // release_memory() right after a large reassembled message (it frees the buffer and its holder).
    FrameParser big;
    seen = feed(big, frame(Opcode::binary, std::string(100 << 10, 'b')), {30000, 60000});
    ASSERT_EQ(seen.size(), 1u);
    big.release_memory();
    EXPECT_EQ(big.memory(), 0u);
    seen = feed(big, frame(Opcode::text, "again"));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].payload, "again");

    // A control frame split across reads.
    FrameParser c;
    seen = feed(c, frame(Opcode::ping, std::string(100, 'p')), {50});
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].payload, std::string(100, 'p'));
    std::string empty;
    EXPECT_EQ(c.parse(empty).event, Event::need_more);
    EXPECT_EQ(c.memory(), 0u);
}

TEST(WsFrame, ReassemblyBuffersAreTakenFromTheSharedBudget)
{
    // Two connections' parsers share 128 KiB: A holds 60 KiB of a 100 KiB frame, then B's 100 KiB frame
    // cannot fit beside it and fails with 1009, refused by the budget; the budget never goes past its limit
    // and has everything back once the parsers let go.
    ByteBudget budget(128 << 10);
    const Limits limits{1 << 20, false, &budget};
    const std::string payload_a = pattern(100 << 10);
    std::string wire_a = frame(Opcode::binary, payload_a);
    std::string wire_b = frame(Opcode::binary, std::string(100 << 10, 'b'));
    FrameParser a(limits);
    FrameParser b(limits);
    std::span<char> in_a(wire_a), in_b(wire_b);
    std::size_t at_a = 0;
    for (; at_a < (60u << 10); at_a += 10 << 10) {
        ASSERT_EQ(a.parse(in_a.subspan(at_a, 10 << 10)).event, Event::need_more);
        EXPECT_LE(budget.used(), budget.limit());
    }
    EXPECT_GE(a.memory(), budget.used());
    EXPECT_LT(a.memory() - budget.used(), 256u) << "the budget holds the buffer's capacity";
    EXPECT_GE(budget.used(), 60u << 10) << "what A holds is taken";
    Parsed r;
    std::size_t at_b = 0;
    for (; at_b < in_b.size(); at_b += r.consumed) {
        r = b.parse(in_b.subspan(at_b, std::min<std::size_t>(10 << 10, in_b.size() - at_b)));
        EXPECT_LE(budget.used(), budget.limit());
        if (r.event != Event::need_more)
            break;
    }
    ASSERT_EQ(r.event, Event::error);
    EXPECT_EQ(r.error_code, close_status::too_big);
    EXPECT_TRUE(b.refused_by_budget());
    EXPECT_FALSE(a.refused_by_budget());
    b.discard();
    const std::uint64_t held_by_a = budget.used();
    EXPECT_GE(held_by_a, 60u << 10);
    // A finishes (its buffer may grow now), and gives everything back after its message.
    r = a.parse(in_a.subspan(at_a));
    ASSERT_EQ(r.event, Event::message);
    EXPECT_TRUE(r.payload == payload_a);
    EXPECT_LE(budget.used(), budget.limit());
    a.release_memory();
    EXPECT_EQ(budget.used(), 0u);

    // A message that ends inside one read needs no buffer, whatever the budget says.
    ByteBudget none(1);
    FrameParser c(Limits{1 << 20, false, &none});
    auto seen = feed(c, frame(Opcode::text, std::string(50000, 't')));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].event, Event::message);
    EXPECT_EQ(none.used(), 0u);

    // Limit 0 counts without refusing; a parser destroyed mid-message gives its bytes back.
    ByteBudget counting(0);
    {
        FrameParser d(Limits{1 << 20, false, &counting});
        EXPECT_TRUE(feed(d, frame(Opcode::text, std::string(300000, 'u')).substr(0, 200000)).empty());
        EXPECT_GE(counting.used(), 190000u);
    }
    EXPECT_EQ(counting.used(), 0u);
}

TEST(WsFrame, RandomBytesNeverCrashAndFailWithADefinedCode)
{
    std::mt19937 rng(20240611);
    auto byte = [&] { return static_cast<char>(rng() & 0xFF); };
    const std::string valid = frame(Opcode::text, "h\xC3\xA9", false) + frame(Opcode::ping, "x") +
                              frame(Opcode::continuation, std::string(130, 'q')) +
                              frame(Opcode::close, close_payload(1000, "ok"));
    int errors = 0, events = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::string wire;
        switch (iter % 3) {
        case 0: // noise
            for (std::size_t n = rng() % 300; n > 0; --n)
                wire.push_back(byte());
            break;
        case 1: // a plausible masked header, then noise
            wire.push_back(static_cast<char>(0x80 | (rng() % 3)));
            wire.push_back(static_cast<char>(0x80 | (rng() % 128)));
            for (std::size_t n = rng() % 400; n > 0; --n)
                wire.push_back(byte());
            break;
        default: // a valid stream with a few bytes flipped
            wire = valid;
            for (int k = 0; k < 3; ++k)
                wire[rng() % wire.size()] = byte();
        }
        std::vector<std::size_t> cuts;
        for (std::size_t at = 0; at < wire.size();) {
            at += 1 + rng() % 40;
            if (at < wire.size())
                cuts.push_back(at);
        }
        Limits limits;
        limits.max_message = 1000;
        FrameParser p(limits);
        for (const Seen &s : feed(p, wire, cuts)) {
            ++events;
            switch (s.event) {
            case Event::message:
                EXPECT_TRUE(s.type == Opcode::text || s.type == Opcode::binary);
                EXPECT_LE(s.payload.size(), 1000u);
                break;
            case Event::ping:
            case Event::pong:
                EXPECT_LE(s.payload.size(), 125u);
                break;
            case Event::close:
                EXPECT_TRUE(s.close_code == close_status::no_status || valid_close_code(s.close_code));
                break;
            case Event::error:
                ++errors;
                EXPECT_TRUE(s.error_code == 1002 || s.error_code == 1007 || s.error_code == 1009)
                    << s.error_code;
                break;
            default:
                ADD_FAILURE() << "unexpected event";
            }
        }
        EXPECT_LE(p.memory(), 4096u);
    }
    EXPECT_GT(errors, 1000);
    EXPECT_GT(events, errors);
}
