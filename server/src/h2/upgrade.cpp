// h2c by Upgrade (RFC 7540 §3.2): an HTTP/1.1 request with `Upgrade: h2c` and HTTP2-Settings goes on as
// stream 1 of an HTTP/2 connection after the 101.
#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"
#include "h2/connection.hpp"
#include "h2/stream.hpp"
#include "transport/transport.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>

namespace ferry::server::detail::h2 {

namespace {

// base64url without padding (HTTP2-Settings, RFC 7540 §3.2.1); false on another character.
bool base64url_decode(std::string_view in, std::string &out)
{
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        int v;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '-' || c == '+')
            v = 62;
        else if (c == '_' || c == '/')
            v = 63;
        else if (c == '=')
            break;
        else
            return false;
        acc = (acc << 6) | static_cast<std::uint32_t>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((acc >> bits) & 0xff));
        }
    }
    return true;
}

bool has_token(std::string_view list, std::string_view token)
{
    while (!list.empty()) {
        auto comma = list.find(',');
        if (iequals(trim_ows(list.substr(0, comma)), token))
            return true;
        if (comma == list.npos)
            break;
        list.remove_prefix(comma + 1);
    }
    return false;
}

} // namespace

bool upgrade_requested(const Request &req)
{
    std::string settings;
    const auto length = req.header("Content-Length");
    return has_token(req.header("Upgrade"), "h2c") && !req.header("HTTP2-Settings").empty() &&
           base64url_decode(req.header("HTTP2-Settings"), settings) && settings.size() % 6 == 0 &&
           !req.chunked && (length.empty() || length == "0") && req.body.empty();
}

bool Connection::upgraded(Request req)
{
    std::string settings;
    base64url_decode(req.header("HTTP2-Settings"), settings);
    const int rv = nghttp2_session_upgrade2(ng_, reinterpret_cast<const std::uint8_t *>(settings.data()),
                                            settings.size(), req.method == "HEAD", nullptr);
    if (rv != 0) {
        log::info("http2", tr_.remote() + ": HTTP2-Settings of an h2c upgrade: " + nghttp2_strerror(rv));
        return false;
    }
    H2Stream *s = begin_stream(1);
    if (!s)
        return false;
    std::erase_if(req.headers, [](const auto &h) {
        return iequals(h.first, "Connection") || iequals(h.first, "Upgrade") ||
               iequals(h.first, "HTTP2-Settings");
    });
    req.version_major = 2;
    req.version_minor = 0;
    req.upgrade = false;
    s->request = std::move(req);
    head_done(*s);
    if (!s->refused) {
        s->ready = true;
        ready_.push_back(s);
    }
    return true;
}

awaitable<void> serve_upgraded(SharedState &st, Transport &tr, const Site &site, Request req,
                               std::string_view received)
{
    auto c = std::make_unique<Connection>(st, tr, site, nullptr);
    if (c->upgraded(std::move(req)))
        co_await c->run(received);
}

} // namespace ferry::server::detail::h2
