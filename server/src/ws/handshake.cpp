#include "handshake.hpp"

#include "ferry/server/http_grammar.hpp"

#include <openssl/evp.h>

#include <cctype>

namespace ferry::server::detail::ws {
namespace {

// Calls f(token) for each comma-separated element of every `name` header line.
template <typename F> void each_token(const Request &req, std::string_view name, F &&f)
{
    for (const auto &[n, v] : req.headers) {
        if (!iequals(n, name))
            continue;
        std::string_view rest = v;
        while (!rest.empty()) {
            auto comma = rest.find(',');
            std::string_view item = trim_ows(rest.substr(0, comma));
            if (!item.empty())
                f(item);
            if (comma == std::string_view::npos)
                break;
            rest.remove_prefix(comma + 1);
        }
    }
}

bool has_token(const Request &req, std::string_view name, std::string_view token)
{
    bool found = false;
    each_token(req, name, [&](std::string_view t) { found = found || iequals(t, token); });
    return found;
}

std::string_view path_of(std::string_view target)
{
    if (auto scheme = target.find("://"); scheme != std::string_view::npos && target[0] != '/') {
        auto slash = target.find('/', scheme + 3); // absolute-form
        target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
    return target.substr(0, target.find('?'));
}

// A Sec-WebSocket-Key is the base64 of 16 bytes: 22 characters of the alphabet and "==".
bool valid_key(std::string_view k)
{
    if (k.size() != 24 || k[22] != '=' || k[23] != '=')
        return false;
    for (std::size_t i = 0; i < 22; ++i) {
        const unsigned char c = static_cast<unsigned char>(k[i]);
        if (!std::isalnum(c) && c != '+' && c != '/')
            return false;
    }
    // The last character before the padding carries 2 bits: only A, Q, g, w leave the rest zero.
    return k[21] == 'A' || k[21] == 'Q' || k[21] == 'g' || k[21] == 'w';
}

} // namespace

bool is_upgrade_for(const Request &req, std::string_view path)
{
    return path_of(req.target) == path && has_token(req, "Upgrade", "websocket");
}

Refusal check_upgrade(const Request &req, std::string_view allowed_origin)
{
    if (req.method != "GET")
        return {405, "a WebSocket handshake must be a GET request", "Allow: GET\r\n"};
    if (req.version_major != 1 || req.version_minor < 1)
        return {400, "a WebSocket handshake needs HTTP/1.1", {}};
    if (!has_token(req, "Connection", "upgrade"))
        return {400, "a WebSocket handshake needs \"Connection: Upgrade\"", {}};
    if (!req.body.empty() || req.chunked || !req.header("Content-Length").empty())
        return {400, "a WebSocket handshake has no body", {}};
    std::string_view version = trim_ows(req.header("Sec-WebSocket-Version"));
    if (version != "13")
        return {426,
                version.empty() ? "Sec-WebSocket-Version is missing"
                                : "only WebSocket version 13 is supported",
                "Sec-WebSocket-Version: 13\r\n"};
    unsigned keys = 0;
    for (const auto &[n, v] : req.headers)
        if (iequals(n, "Sec-WebSocket-Key"))
            ++keys;
    if (keys != 1 || !valid_key(trim_ows(req.header("Sec-WebSocket-Key"))))
        return {400, "Sec-WebSocket-Key is missing or not the base64 of 16 bytes", {}};
    if (!allowed_origin.empty() && allowed_origin != "*") {
        std::string_view origin = trim_ows(req.header("Origin"));
        // Browsers always send Origin; a client without one is not a page of another site (the check is
        // against cross-site WebSocket hijacking), so it passes.
        if (!origin.empty() && !origin_matches(allowed_origin, origin))
            return {403, "origin not allowed", {}};
    }
    return {};
}

std::string accept_key(std::string_view client_key)
{
    static constexpr std::string_view guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    std::string in;
    in.reserve(client_key.size() + guid.size());
    in.append(client_key).append(guid);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    EVP_Digest(in.data(), in.size(), md, &md_len, EVP_sha1(), nullptr);
    unsigned char out[64];
    int n = EVP_EncodeBlock(out, md, static_cast<int>(md_len));
    return std::string(reinterpret_cast<const char *>(out), static_cast<std::size_t>(n));
}

std::vector<std::string> offered_protocols(const Request &req)
{
    std::vector<std::string> out;
    each_token(req, "Sec-WebSocket-Protocol", [&](std::string_view t) { out.emplace_back(t); });
    return out;
}

bool origin_matches(std::string_view p, std::string_view s)
{
    // Iterative glob with backtracking to the last star: linear enough for one short pattern.
    std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
    auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
    while (si < s.size()) {
        if (pi < p.size() && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < p.size() && lower(p[pi]) == lower(s[si])) {
            ++pi, ++si;
        } else if (star != std::string_view::npos) {
            pi = star + 1;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*')
        ++pi;
    return pi == p.size();
}

} // namespace ferry::server::detail::ws
