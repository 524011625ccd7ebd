// http.ssl.redirect (internal to server/): every request on the plain listener is answered 308 Permanent
// Redirect to the same host, path and query over HTTPS (RoadRunner's redirect; 308 keeps the method and body,
// where 301 would let a POST become a GET).
#pragma once

#include "handler.hpp"

#include <cstdint>
#include <string>

namespace ferry::server::detail {

struct SharedState;

class RedirectHandler final : public Handler {
public:
    explicit RedirectHandler(const SharedState &state) : state_(state) {}
    std::string_view name() const override { return "redirect"; }
    bool accepts(const Request &) const override { return true; }
    std::unique_ptr<Connection> connect() override;
    // The HTTPS listener's port, once bound (0 given in the config: the one it got); 443 is left out of URLs.
    void set_port(std::uint16_t port) { port_ = port; }

    // "https://host[:port]/path?query" for a request with this Host (its port dropped) and target.
    static std::string location(std::string_view host, std::string_view target, std::uint16_t port);

private:
    const SharedState &state_;
    std::uint16_t port_ = 443;
};

} // namespace ferry::server::detail
