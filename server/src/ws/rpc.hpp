// The websockets methods of the RPC listener (docs/protocol.md §9; internal to server/): any PHP code (an
// HTTP worker handling a POST, a cron script) publishes to topics, sends to connections or closes them
// through rpc.listen, JSON-encoded, with Ferry\Worker\Rpc.
#pragma once

#include "ferry/base/result.hpp"
#include "ws/hub.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace ferry::server::detail::ws {

// websockets.Publish {"topics": [..], "message": "..." | "base64": "...", "binary": bool}
// websockets.Send    {"to": ["1.42", ..], "message" | "base64", "binary"}
// websockets.Close   {"to": [..], "code": 1000, "reason": "..."}
// nullopt when `method` is none of them. `sse`: text messages get their SSE form too.
std::optional<Result<std::string>> rpc_call(Publisher &publisher, std::string_view method,
                                            std::string_view arg, bool sse);

} // namespace ferry::server::detail::ws
