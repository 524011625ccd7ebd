#include "redirect.hpp"

#include "ferry/server/http_grammar.hpp"
#include "http/response.hpp"
#include "shared_state.hpp"

namespace ferry::server::detail {

std::string RedirectHandler::location(std::string_view host, std::string_view target, std::uint16_t port)
{
    // The Host's port goes ("[::1]:8080" → "[::1]"); the parser validated the Host (uri-host [":" port]).
    if (auto colon = host.rfind(':'); colon != std::string_view::npos && host.find(']', colon) == host.npos)
        host = host.substr(0, colon);
    // The absolute form's path and query ("http://h/a?b" → "/a?b"); "*" (OPTIONS) has none.
    if (!target.empty() && target.front() != '/') {
        auto scheme = target.find("://");
        auto slash = scheme == target.npos ? target.npos : target.find('/', scheme + 3);
        target = slash == target.npos ? std::string_view("/") : target.substr(slash);
    }
    std::string url = "https://";
    url += host;
    if (port != 443)
        url += ":" + std::to_string(port);
    url += target;
    return url;
}

namespace {

class RedirectConnection final : public Handler::Connection {
public:
    RedirectConnection(const SharedState &st, const std::uint16_t &port) : st_(st), port_(port) {}

    awaitable<After> handle(Exchange &ex) override
    {
        const Request &req = ex.request;
        std::string_view host = req.header("Host");
        if (host.empty())
            host = st_.default_host;
        const std::string extra = "Location: " + RedirectHandler::location(host, req.target, port_) + "\r\n";
        append_text(ex.out, 308, "Moved to HTTPS\n", ex.keep_alive, req.method == "HEAD", extra);
        ex.status = 308;
        co_return ex.keep_alive ? After::keep_alive : After::close;
    }

private:
    const SharedState &st_;
    const std::uint16_t &port_;
};

} // namespace

std::unique_ptr<Handler::Connection> RedirectHandler::connect()
{
    return std::make_unique<RedirectConnection>(state_, port_);
}

} // namespace ferry::server::detail
