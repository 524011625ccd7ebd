// The WebSocket handler (internal to server/; docs/protocol.md §9): an upgrade on websockets.path is checked
// (RFC 6455 §4.2), authorized by a websockets worker (its "open" event: accept with actions, or reject with
// a status), answered 101, and the socket handed to a ws::WsConn, which the session then forgets.
#pragma once

#include "handler.hpp"
#include "proxies.hpp"

namespace ferry::server::detail {

struct SharedState;
namespace ws {
struct WsLoop;
}

class WebSocketHandler final : public Handler {
public:
    WebSocketHandler(SharedState &state, ws::WsLoop &loop);
    std::string_view name() const override { return "websocket"; }
    bool accepts(const Request &req) const override;
    std::unique_ptr<Connection> connect() override;

private:
    SharedState &state_;
    ws::WsLoop &loop_;
    TrustedProxies proxies_;
};

} // namespace ferry::server::detail
