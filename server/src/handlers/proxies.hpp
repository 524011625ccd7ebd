// Trusted proxies (internal to server/), RoadRunner's proxy_ip_parser: when the direct peer is in one of
// `http.trusted_subnets`, the client's address comes from the proxy's headers and the URI scheme from
// X-Forwarded-Proto / Forwarded; from anyone else those headers are ignored (they are anyone's to forge).
#pragma once

#include "ferry/relay/context.hpp"
#include "ferry/server/http_parser.hpp"

#include <boost/asio/ip/address.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail {

class TrustedProxies {
public:
    // Subnets as conf validated them: "10.0.0.0/8", "fd00::/8", "127.0.0.1".
    explicit TrustedProxies(const std::vector<std::string> &subnets);

    bool empty() const { return nets_.empty(); }
    bool trusts(std::string_view peer) const;

    // The client's address from the first of Forwarded-for... in RoadRunner's order: X-Forwarded-For (its
    // left-most entry), Forwarded (the first for=), X-Real-IP, True-Client-IP, CF-Connecting-IP; "" when
    // none holds a valid IP address.
    static std::string client_address(const Request &req);
    // "https" or "http" from X-Forwarded-Proto or Forwarded's proto=; "" when neither says.
    static std::string_view scheme(const Request &req);

    // Rewrites ctx.remote_addr and the scheme of ctx.uri when ctx.remote_addr (the peer) is trusted.
    void apply(const Request &req, relay::RequestContext &ctx) const;

private:
    struct Net {
        boost::asio::ip::address addr;
        unsigned prefix;
    };
    std::vector<Net> nets_;
};

} // namespace ferry::server::detail
