// The PHP handler (internal to server/): relays a request to the worker pool (pool/) and writes the
// worker's answer, whole or streamed. Serves every request no other handler takes.
#pragma once

#include "handler.hpp"
#include "proxies.hpp"

#include "ferry/pool/pool.hpp"

using SSL = struct ssl_st;

namespace ferry::server::detail {

struct SharedState;

// The HTTP context PHP gets for `req` (docs/protocol.md §3); `ctx` is reused, its strings keep their
// capacity. `tls`: the connection's TLS session (an https URI, the client certificate's attributes), or null.
void build_request_context(relay::RequestContext &ctx, const Request &req, const std::string &remote,
                           std::string_view default_host, SSL *tls);

class PhpHandler final : public Handler {
public:
    PhpHandler(SharedState &state, pool::Pool &pool);
    std::string_view name() const override { return "php"; }
    bool accepts(const Request &) const override { return true; }
    std::unique_ptr<Connection> connect() override;

private:
    SharedState &state_;
    pool::Pool &pool_;
    TrustedProxies proxies_; // http.trusted_subnets, parsed once per loop
};

} // namespace ferry::server::detail
