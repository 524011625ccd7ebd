// The WebSocket opening handshake, server side (RFC 6455 §4.2; internal to server/): which requests are
// upgrades for us, what is wrong with a bad one, the Sec-WebSocket-Accept value, the Origin check.
#pragma once

#include "ferry/server/http_parser.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail::ws {

// The request asks for a WebSocket (Upgrade: websocket) on `path` (the target's path, query ignored).
bool is_upgrade_for(const Request &req, std::string_view path);

struct Refusal {
    int status = 0;      // 0: the handshake is valid
    std::string message; // why (for the client's error body and the log)
    std::string extra;   // header lines to add ("Sec-WebSocket-Version: 13\r\n" with 426)
};

// Validates an upgrade request (method, version, Connection, key, version, origin). `allowed_origin`: one
// pattern, `*` matching any run of characters; "" or "*" allow any Origin (and none).
Refusal check_upgrade(const Request &req, std::string_view allowed_origin);

// base64(SHA-1(key + GUID)) (OpenSSL's libcrypto does both).
std::string accept_key(std::string_view client_key);

// The subprotocols the client offers (Sec-WebSocket-Protocol, comma-separated, every header line).
std::vector<std::string> offered_protocols(const Request &req);

// Glob with `*` only, case-insensitive (origins are case-insensitive in scheme and host).
bool origin_matches(std::string_view pattern, std::string_view origin);

} // namespace ferry::server::detail::ws
