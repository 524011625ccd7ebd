#include "handlers/proxies.hpp"

#include <gtest/gtest.h>

using ferry::relay::RequestContext;
using ferry::server::Request;
using ferry::server::detail::TrustedProxies;

namespace {

Request with(std::vector<std::pair<std::string, std::string>> headers)
{
    Request r;
    r.headers = std::move(headers);
    return r;
}

RequestContext ctx_from(std::string peer)
{
    RequestContext c;
    c.remote_addr = std::move(peer);
    c.uri = "http://example.com/path?q";
    return c;
}

} // namespace

TEST(TrustedProxies, SubnetsV4V6AndSingleAddresses)
{
    TrustedProxies p({"10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"});
    EXPECT_TRUE(p.trusts("10.1.2.3"));
    EXPECT_TRUE(p.trusts("192.168.1.7"));
    EXPECT_FALSE(p.trusts("192.168.1.8"));
    EXPECT_FALSE(p.trusts("11.0.0.1"));
    EXPECT_TRUE(p.trusts("fd12::5"));
    EXPECT_TRUE(p.trusts("::1"));
    EXPECT_FALSE(p.trusts("fe80::1"));
    EXPECT_TRUE(p.trusts("::ffff:10.9.9.9")) << "an IPv4-mapped peer is its IPv4 address";
    EXPECT_FALSE(p.trusts("not an ip"));
    EXPECT_TRUE(TrustedProxies({}).empty());
    EXPECT_TRUE(TrustedProxies({"0.0.0.0/0"}).trusts("203.0.113.9"));
}

TEST(TrustedProxies, HeadersInRoadRunnersOrder)
{
    EXPECT_EQ(TrustedProxies::client_address(
                  with({{"X-Forwarded-For", "203.0.113.7, 10.0.0.1"}, {"X-Real-IP", "198.51.100.1"}})),
              "203.0.113.7")
        << "the left-most X-Forwarded-For entry first";
    EXPECT_EQ(TrustedProxies::client_address(
                  with({{"Forwarded", "for=\"[2001:db8::1]:4711\";proto=https, for=1.2.3.4"}})),
              "2001:db8::1");
    EXPECT_EQ(TrustedProxies::client_address(with({{"Forwarded", "proto=http;For=192.0.2.60:80"}})),
              "192.0.2.60");
    EXPECT_EQ(TrustedProxies::client_address(
                  with({{"X-Real-IP", "198.51.100.1"}, {"CF-Connecting-IP", "1.1.1.1"}})),
              "198.51.100.1");
    EXPECT_EQ(TrustedProxies::client_address(
                  with({{"True-Client-IP", "2.2.2.2"}, {"CF-Connecting-IP", "1.1.1.1"}})),
              "2.2.2.2");
    EXPECT_EQ(TrustedProxies::client_address(with({{"CF-Connecting-IP", "1.1.1.1"}})), "1.1.1.1");
    EXPECT_EQ(TrustedProxies::client_address(with({{"X-Forwarded-For", "evil<script>, 1.2.3.4"}})), "")
        << "not an address: nothing is taken";
    EXPECT_EQ(TrustedProxies::client_address(with({})), "");
    EXPECT_EQ(TrustedProxies::scheme(with({{"X-Forwarded-Proto", "HTTPS"}})), "https");
    EXPECT_EQ(TrustedProxies::scheme(with({{"Forwarded", "for=1.2.3.4;proto=https"}})), "https");
    EXPECT_EQ(TrustedProxies::scheme(with({{"X-Forwarded-Proto", "gopher"}})), "");
}

TEST(TrustedProxies, OnlyATrustedPeerChangesTheContext)
{
    TrustedProxies p({"127.0.0.0/8"});
    auto req = with({{"X-Forwarded-For", "203.0.113.7"}, {"X-Forwarded-Proto", "https"}});
    auto trusted = ctx_from("127.0.0.1");
    p.apply(req, trusted);
    EXPECT_EQ(trusted.remote_addr, "203.0.113.7");
    EXPECT_EQ(trusted.uri, "https://example.com/path?q");
    auto spoofed = ctx_from("198.51.100.20");
    p.apply(req, spoofed);
    EXPECT_EQ(spoofed.remote_addr, "198.51.100.20");
    EXPECT_EQ(spoofed.uri, "http://example.com/path?q");
}
