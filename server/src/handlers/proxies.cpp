#include "proxies.hpp"

#include "ferry/server/http_grammar.hpp"

#include <array>

namespace ferry::server::detail {
namespace {

namespace ip = boost::asio::ip;

// The address in a header value: "203.0.113.7", "2001:db8::1", "[2001:db8::1]:4711", "\"[::1]\"" or
// "192.0.2.1:80"; "" when it is none.
std::string valid_ip(std::string_view v)
{
    v = trim_ows(v);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"')
        v = v.substr(1, v.size() - 2);
    if (!v.empty() && v.front() == '[') {
        auto close = v.find(']');
        if (close == std::string_view::npos)
            return {};
        v = v.substr(1, close - 1);
    } else if (v.find(':') == v.rfind(':') && v.find(':') != std::string_view::npos) {
        v = v.substr(0, v.find(':')); // IPv4 with a port
    }
    boost::system::error_code ec;
    auto a = ip::make_address(v, ec);
    return ec ? std::string() : a.to_string();
}

// The value of `key=` in the first element of a Forwarded header (RFC 7239), "" if absent.
std::string_view forwarded_param(std::string_view header, std::string_view key)
{
    std::string_view first = header.substr(0, header.find(','));
    while (!first.empty()) {
        auto semi = first.find(';');
        std::string_view pair = trim_ows(first.substr(0, semi));
        first = semi == std::string_view::npos ? std::string_view() : first.substr(semi + 1);
        auto eq = pair.find('=');
        if (eq != std::string_view::npos && iequals(trim_ows(pair.substr(0, eq)), key))
            return trim_ows(pair.substr(eq + 1));
    }
    return {};
}

bool in_net(const ip::address &a, const ip::address &net, unsigned prefix)
{
    auto bytes_of = [](const ip::address &x, std::array<unsigned char, 16> &out) -> std::size_t {
        if (x.is_v4()) {
            auto b = x.to_v4().to_bytes();
            std::copy(b.begin(), b.end(), out.begin());
            return 4;
        }
        auto b = x.to_v6().to_bytes();
        std::copy(b.begin(), b.end(), out.begin());
        return 16;
    };
    ip::address addr = a;
    if (addr.is_v6() && addr.to_v6().is_v4_mapped() && net.is_v4())
        addr = ip::make_address_v4(ip::v4_mapped, addr.to_v6());
    std::array<unsigned char, 16> x{}, n{};
    std::size_t lx = bytes_of(addr, x), ln = bytes_of(net, n);
    if (lx != ln)
        return false;
    for (unsigned bit = 0; bit < prefix; ++bit) {
        unsigned char mask = static_cast<unsigned char>(0x80 >> (bit % 8));
        if ((x[bit / 8] & mask) != (n[bit / 8] & mask))
            return false;
    }
    return true;
}

} // namespace

TrustedProxies::TrustedProxies(const std::vector<std::string> &subnets)
{
    for (const auto &s : subnets) {
        auto slash = s.find('/');
        boost::system::error_code ec;
        auto a = ip::make_address(s.substr(0, slash), ec);
        if (ec)
            continue; // conf validated the list: not reached
        unsigned bits = a.is_v4() ? 32 : 128;
        unsigned prefix =
            slash == std::string::npos ? bits : static_cast<unsigned>(std::stoul(s.substr(slash + 1)));
        nets_.push_back(Net{a, std::min(prefix, bits)});
    }
}

bool TrustedProxies::trusts(std::string_view peer) const
{
    // Per request when subnets are set: parsed from a stack copy (make_address(string_view) allocates).
    char text[64];
    if (peer.size() >= sizeof text)
        return false;
    peer.copy(text, peer.size());
    text[peer.size()] = '\0';
    boost::system::error_code ec;
    auto a = ip::make_address(static_cast<const char *>(text), ec);
    if (ec)
        return false;
    for (const auto &n : nets_)
        if (in_net(a, n.addr, n.prefix))
            return true;
    return false;
}

std::string TrustedProxies::client_address(const Request &req)
{
    if (auto xff = req.header("X-Forwarded-For"); !xff.empty())
        return valid_ip(xff.substr(0, xff.find(',')));
    if (auto fwd = req.header("Forwarded"); !fwd.empty())
        return valid_ip(forwarded_param(fwd, "for"));
    for (const char *name : {"X-Real-IP", "True-Client-IP", "CF-Connecting-IP"})
        if (auto v = req.header(name); !v.empty())
            return valid_ip(v);
    return {};
}

std::string_view TrustedProxies::scheme(const Request &req)
{
    std::string_view proto = req.header("X-Forwarded-Proto");
    if (proto.empty())
        proto = forwarded_param(req.header("Forwarded"), "proto");
    proto = trim_ows(proto.substr(0, proto.find(',')));
    if (iequals(proto, "https"))
        return "https";
    if (iequals(proto, "http"))
        return "http";
    return {};
}

void TrustedProxies::apply(const Request &req, relay::RequestContext &ctx) const
{
    if (nets_.empty() || !trusts(ctx.remote_addr))
        return;
    if (std::string client = client_address(req); !client.empty())
        ctx.remote_addr = std::move(client);
    std::string_view s = scheme(req);
    auto colon = ctx.uri.find("://");
    if (!s.empty() && colon != std::string::npos)
        ctx.uri.replace(0, colon, s);
}

} // namespace ferry::server::detail
