// The WebSocket frame parser (RFC 6455 §5): frames whole and split at every byte, fragments, control frames
// between them, UTF-8, protocol errors at the offending byte, limits.
#include "ws_frame_helpers.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace ferry::server::detail::ws;
using namespace ws_test;

TEST(WsFrame, SingleFramesWholeAndSplitAtEveryByte)
{
#if defined(__SANITIZE_THREAD__)
    constexpr std::size_t middle_stride = 61;
#elif defined(__SANITIZE_ADDRESS__)
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
            ASSERT_EQ(r.event, FrameEvent::message);
            EXPECT_EQ(r.type, Opcode::binary);
            EXPECT_EQ(r.consumed, wire.size());
            EXPECT_EQ(r.payload, payload);
            EXPECT_EQ(r.payload.data(), buf.data() + header);
            EXPECT_EQ(p.memory(), 0u);
        }
        // In two pieces, cut at every byte. Under the sanitizers (ASan at -O0 ~10x slower; TSan on this
        // test's byte copies ~60x: 400 s) the middle of a 64 KiB payload is cut at every 7th (61st) byte
        // only: an odd stride still meets every mask and word phase.
        FrameParser p;
        auto near_edge = [&](std::size_t c) { return c < 300 || c + 300 > wire.size(); };
        for (std::size_t cut = 0; cut <= wire.size(); cut += near_edge(cut) ? 1 : middle_stride) {
            auto seen = feed(p, wire, {cut});
            ASSERT_EQ(seen.size(), 1u) << cut;
            ASSERT_EQ(seen[0].event, FrameEvent::message) << cut;
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
    ASSERT_EQ(r.event, FrameEvent::message);
    EXPECT_EQ(r.type, Opcode::text);
    EXPECT_EQ(r.payload, "h\xC3\xA9llo");
    EXPECT_EQ(r.consumed, 6u + 6u);
    in = in.subspan(r.consumed);
    r = p.parse(in);
    ASSERT_EQ(r.event, FrameEvent::ping);
    EXPECT_EQ(r.payload, "are you there");
    in = in.subspan(r.consumed);
    r = p.parse(in);
    ASSERT_EQ(r.event, FrameEvent::pong);
    EXPECT_EQ(r.payload, "");
    in = in.subspan(r.consumed);
    r = p.parse(in);
    ASSERT_EQ(r.event, FrameEvent::message);
    EXPECT_EQ(r.payload, "");
    EXPECT_EQ(r.consumed, in.size());
    r = p.parse(in.subspan(r.consumed));
    EXPECT_EQ(r.event, FrameEvent::need_more);
    EXPECT_EQ(r.consumed, 0u);
}

TEST(WsFrame, HeaderInOneReadPayloadInTheNextIsStillNotCopied)
{
    const std::string wire = frame(Opcode::text, std::string(300, 't'));
    FrameParser p;
    std::string head = wire.substr(0, 8), body = wire.substr(8);
    Parsed r = p.parse(head);
    ASSERT_EQ(r.event, FrameEvent::need_more);
    EXPECT_EQ(r.consumed, 8u);
    r = p.parse(body);
    ASSERT_EQ(r.event, FrameEvent::message);
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
        EXPECT_EQ(seen[0].event, FrameEvent::message);
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
        EXPECT_EQ(seen[0].event, FrameEvent::ping) << where;
        EXPECT_EQ(seen[0].payload, "p1") << where;
        EXPECT_EQ(seen[1].event, FrameEvent::message) << where;
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
    EXPECT_EQ(seen[0].event, FrameEvent::pong);
    EXPECT_EQ(seen[1].event, FrameEvent::close);
    EXPECT_EQ(seen[1].close_code, 1000);
    EXPECT_EQ(seen[1].reason, "bye");
    EXPECT_EQ(seen[2].event, FrameEvent::message);
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
    ASSERT_EQ(r.event, FrameEvent::error);
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
        ASSERT_EQ(r.event, FrameEvent::error) << testing::PrintToString(prefix);
        EXPECT_EQ(r.error_code, 1002);
        EXPECT_EQ(r.consumed, prefix.size());
        // Sticky: the same error, nothing consumed.
        std::string more = frame(Opcode::text, "x");
        const Parsed again = p.parse(more);
        EXPECT_EQ(again.event, FrameEvent::error);
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
    EXPECT_EQ(seen[0].event, FrameEvent::message);
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
        ASSERT_EQ(r.event, FrameEvent::error);
        EXPECT_EQ(r.error_code, 1009);
        EXPECT_EQ(p.memory(), 0u);
    }
    {
        FrameParser p; // default 16 MiB
        std::string buf = header_only(0x82, std::uint64_t{1} << 40);
        const Parsed r = p.parse(buf);
        ASSERT_EQ(r.event, FrameEvent::error);
        EXPECT_EQ(r.error_code, 1009);
        EXPECT_EQ(p.memory(), 0u);
    }
    {
        // By fragments: 600 bytes held, the next fragment announces 500 more.
        FrameParser p(small);
        auto seen = feed(p, frame(Opcode::binary, std::string(600, 'a'), false) + frame(Opcode::ping, "") +
                                header_only(0x00, 500));
        ASSERT_EQ(seen.size(), 2u);
        EXPECT_EQ(seen[1].event, FrameEvent::error);
        EXPECT_EQ(seen[1].error_code, 1009);
        EXPECT_LT(p.memory(), 2048u);
        EXPECT_EQ(error_of(frame(Opcode::text, std::string(600, 'a'), false) +
                               frame(Opcode::continuation, std::string(400, 'b')),
                           small),
                  0);
    }
}
