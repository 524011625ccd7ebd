// The UTF-8 validator of WebSocket text messages: boundaries, the first impossible byte, sequences split
// across reads, and agreement with a reference on every short sequence.
#include "ws_frame_helpers.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace ferry::server::detail::ws;
using namespace ws_test;

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
