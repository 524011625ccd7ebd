#include "control/probe_server.hpp"
#include "control/rpc_frame.hpp"
#include "control/rpc_server.hpp"

#include <gtest/gtest.h>

using namespace ferry::server::detail;
namespace relay = ferry::relay;

TEST(RpcFrame, RoundTripsAndSplitsAtEveryByte)
{
    const std::string f = encode_rpc(relay::flag::codec_json, 7, "informer.Workers", "\"http\"");
    for (std::size_t cut = 0; cut < f.size(); ++cut) {
        auto p = parse_rpc(std::string_view(f).substr(0, cut), 1 << 20);
        ASSERT_EQ(p.status, relay::DecodeStatus::need_more) << cut;
    }
    auto p = parse_rpc(f + "trailing", 1 << 20);
    ASSERT_EQ(p.status, relay::DecodeStatus::ok);
    EXPECT_EQ(p.needed, f.size());
    EXPECT_EQ(p.message.seq, 7u);
    EXPECT_EQ(p.message.method, "informer.Workers");
    EXPECT_EQ(p.message.body, "\"http\"");
    EXPECT_EQ(p.message.flags, relay::flag::codec_json);
}

TEST(RpcFrame, GoldenBytesAsRoadRunnersPhpClientSendsThem)
{
    // Spiral\Goridge\RPC\RPC->call('resetter.Reset', 'http'): flags JSON, options [seq 1, 14], payload
    // "resetter.Reset" . json_encode('http').
    const std::string f = encode_rpc(relay::flag::codec_json, 1, "resetter.Reset", "\"http\"");
    ASSERT_EQ(f.size(), 12u + 8u + 14u + 6u);
    EXPECT_EQ(static_cast<unsigned char>(f[0]), 0x15); // version 1, 5 words of header
    EXPECT_EQ(static_cast<unsigned char>(f[1]), 0x08);
    EXPECT_EQ(f.substr(12, 8), std::string("\x01\0\0\0\x0e\0\0\0", 8));
    EXPECT_EQ(f.substr(20), "resetter.Reset\"http\"");
}

TEST(RpcFrame, MalformedFramesAreErrorsThatSayWhy)
{
    auto one_option = relay::encode_frame(relay::flag::codec_json, 0, std::vector<std::uint32_t>{3}, "abc");
    auto p = parse_rpc(one_option, 1 << 20);
    EXPECT_EQ(p.status, relay::DecodeStatus::error);
    EXPECT_NE(p.error.find("needs 2 options"), std::string::npos) << p.error;

    auto too_long = relay::encode_frame(relay::flag::codec_json, 0, std::vector<std::uint32_t>{1, 10}, "abc");
    p = parse_rpc(too_long, 1 << 20);
    EXPECT_EQ(p.status, relay::DecodeStatus::error);
    EXPECT_NE(p.error.find("does not fit"), std::string::npos) << p.error;

    auto no_method = relay::encode_frame(relay::flag::codec_json, 0, std::vector<std::uint32_t>{1, 0}, "abc");
    EXPECT_EQ(parse_rpc(no_method, 1 << 20).status, relay::DecodeStatus::error);

    p = parse_rpc("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1 << 20);
    EXPECT_EQ(p.status, relay::DecodeStatus::error);

    auto big = encode_rpc(relay::flag::codec_json, 1, "m", std::string(2000, 'x'));
    EXPECT_EQ(parse_rpc(big, 1000).status, relay::DecodeStatus::error); // over the payload limit

    std::string bad_crc = encode_rpc(relay::flag::codec_json, 1, "m", "1");
    bad_crc[7] ^= 0x55;
    EXPECT_EQ(parse_rpc(bad_crc, 1 << 20).status, relay::DecodeStatus::error);
}

TEST(RpcFrame, AnOverSizeFrameIsAnRpcFrameThatSaysBothSizes)
{
    // An over-size call is still answered: its sequence and method name are read, its length is told.
    const std::string f =
        encode_rpc(relay::flag::codec_json, 9, "websockets.Publish", std::string(2000, 'x'));
    auto p = parse_rpc(std::string_view(f).substr(0, 12 + 8 + 5), 1000);
    EXPECT_EQ(p.status, relay::DecodeStatus::need_more) << "the method name is waited for";
    EXPECT_EQ(p.needed, 12u + 8u + 18u);
    p = parse_rpc(std::string_view(f).substr(0, 12 + 8 + 18), 1000);
    ASSERT_EQ(p.status, relay::DecodeStatus::error);
    EXPECT_TRUE(p.too_large);
    EXPECT_EQ(p.error, "RPC frame of 2018 bytes is over the 1000-byte limit");
    EXPECT_EQ(p.message.seq, 9u);
    EXPECT_EQ(p.message.method, "websockets.Publish");
    EXPECT_EQ(p.needed, f.size()) << "the whole frame, to be skipped";
    // a method name longer than 256 bytes is not waited for
    const std::string g =
        encode_rpc(relay::flag::codec_json, 3, std::string(300, 'm'), std::string(2000, 'x'));
    p = parse_rpc(std::string_view(g).substr(0, 20), 1000);
    EXPECT_TRUE(p.too_large);
    EXPECT_EQ(p.message.seq, 3u);
    EXPECT_EQ(p.message.method, "");
    // at the limit it is taken
    const std::string h = encode_rpc(relay::flag::codec_json, 1, "m", std::string(999, 'x'));
    EXPECT_EQ(parse_rpc(h, 1000).status, relay::DecodeStatus::ok);
    // not an RPC frame stays that
    EXPECT_FALSE(parse_rpc("GET / HTTP/1.1\r\n\r\n", 1000).too_large);
}

TEST(RpcFrame, PayloadLimitFollowsWebsocketsMaxMessageSize)
{
    ferry::conf::Config cfg;
    EXPECT_EQ(rpc_payload_limit(cfg), 1u << 20) << "no websockets: 1 MiB";
    cfg.websockets.enabled = true;
    EXPECT_EQ(rpc_payload_limit(cfg), 2u * (16u << 20) + (64u << 10)) << "16 MiB messages by default";
    cfg.websockets.max_message_size = 100;
    EXPECT_EQ(rpc_payload_limit(cfg), 1u << 20) << "at least 1 MiB";
    cfg.websockets.max_message_size = std::uint64_t(1) << 40;
    EXPECT_EQ(rpc_payload_limit(cfg), 0xFFFFFFFFu) << "a Goridge length is 32 bits";
}

TEST(RpcRides, OnTheAdminListenerWhoseAddressItNames)
{
    ferry::conf::Config cfg;
    cfg.status.enabled = true;
    cfg.status.address = {"127.0.0.1", 2114};
    cfg.metrics.enabled = true;
    cfg.metrics.address = {"127.0.0.1", 2112};
    cfg.rpc.listen = "tcp://127.0.0.1:6001";
    EXPECT_EQ(rpc_rides(cfg), ""); // its own port
    cfg.rpc.listen = "tcp://127.0.0.1:2114";
    EXPECT_EQ(rpc_rides(cfg), "status.address");
    cfg.rpc.listen = "tcp://127.0.0.1:2112";
    EXPECT_EQ(rpc_rides(cfg), "metrics.address");
    cfg.metrics.enabled = false; // nothing listens there
    EXPECT_EQ(rpc_rides(cfg), "");
    cfg.status.address.port = 0; // "any free port" for each: never one address
    cfg.rpc.listen = "tcp://127.0.0.1:0";
    EXPECT_EQ(rpc_rides(cfg), "");
    cfg.status.address = {"::1", 2114};
    cfg.rpc.listen = "tcp://[::1]:2114";
    EXPECT_EQ(rpc_rides(cfg), "status.address");
    cfg.rpc.listen = "unix:///run/ferry.sock";
    EXPECT_EQ(rpc_rides(cfg), "");
}

TEST(RpcRides, AFramesFirstByteIsNeverAnHttpRequests)
{
    EXPECT_TRUE(opens_rpc_frame(encode_rpc(0, 1, "informer.List", "true")[0]));
    for (int b : {0x13, 0x14, 0x15})
        EXPECT_TRUE(opens_rpc_frame(static_cast<unsigned char>(b)));
    for (const char *method :
         {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"})
        EXPECT_FALSE(opens_rpc_frame(static_cast<unsigned char>(method[0]))) << method;
    EXPECT_FALSE(opens_rpc_frame('\r')); // a CRLF before the request line (tolerated by the parser)
    EXPECT_FALSE(opens_rpc_frame(0x16)); // a TLS ClientHello's record (the admin listener over TLS later)
}
