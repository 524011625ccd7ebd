// WebSocket close frames and codes, the encoder byte by byte, memory held only while needed, the shared
// reassembly budget, and random bytes.
#include "ws_frame_helpers.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace ferry::server::detail::ws;
using namespace ws_test;

TEST(WsFrame, CloseFrames)
{
    {
        FrameParser p;
        auto seen = feed(p, frame(Opcode::close, ""));
        ASSERT_EQ(seen.size(), 1u);
        EXPECT_EQ(seen[0].event, FrameEvent::close);
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
        EXPECT_EQ(seen[0].event, FrameEvent::close);
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
    ASSERT_EQ(r.event, FrameEvent::need_more);
    EXPECT_GT(p.memory(), 0u);
    EXPECT_LT(p.memory(), 20000u) << "grows with what arrives, not with the declared length";
    r = p.parse(in.subspan(5000));
    ASSERT_EQ(r.event, FrameEvent::message);
    EXPECT_TRUE(r.payload == payload);
    EXPECT_GE(p.memory(), payload.size());
    r = p.parse(in.subspan(5000 + r.consumed));
    ASSERT_EQ(r.event, FrameEvent::ping);
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
    EXPECT_EQ(c.parse(empty).event, FrameEvent::need_more);
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
        ASSERT_EQ(a.parse(in_a.subspan(at_a, 10 << 10)).event, FrameEvent::need_more);
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
        if (r.event != FrameEvent::need_more)
            break;
    }
    ASSERT_EQ(r.event, FrameEvent::error);
    EXPECT_EQ(r.error_code, close_status::too_big);
    EXPECT_TRUE(b.refused_by_budget());
    EXPECT_FALSE(a.refused_by_budget());
    b.discard();
    const std::uint64_t held_by_a = budget.used();
    EXPECT_GE(held_by_a, 60u << 10);
    // A finishes (its buffer may grow now), and gives everything back after its message.
    r = a.parse(in_a.subspan(at_a));
    ASSERT_EQ(r.event, FrameEvent::message);
    EXPECT_TRUE(r.payload == payload_a);
    EXPECT_LE(budget.used(), budget.limit());
    a.release_memory();
    EXPECT_EQ(budget.used(), 0u);

    // A message that ends inside one read needs no buffer, whatever the budget says.
    ByteBudget none(1);
    FrameParser c(Limits{1 << 20, false, &none});
    auto seen = feed(c, frame(Opcode::text, std::string(50000, 't')));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].event, FrameEvent::message);
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
            case FrameEvent::message:
                EXPECT_TRUE(s.type == Opcode::text || s.type == Opcode::binary);
                EXPECT_LE(s.payload.size(), 1000u);
                break;
            case FrameEvent::ping:
            case FrameEvent::pong:
                EXPECT_LE(s.payload.size(), 125u);
                break;
            case FrameEvent::close:
                EXPECT_TRUE(s.close_code == close_status::no_status || valid_close_code(s.close_code));
                break;
            case FrameEvent::error:
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
