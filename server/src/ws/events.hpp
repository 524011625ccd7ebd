// What a websockets worker is asked (internal to server/; docs/protocol.md §9): the request context of each
// event of a WebSocket or SSE connection, with its ferry.ws.* attributes — open (the upgrade request's own
// context), message and close (a POST to websockets.path or sse_path, the message as the body). What the
// worker answers is ws/actions.hpp.
#pragma once

#include "ferry/pool/pool.hpp"
#include "ferry/relay/context.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::server::detail::ws {

// A message or close event of a connection, queued for PHP.
struct PhpEvent {
    bool close = false;
    bool binary = false;
    std::uint16_t code = 0; // close
    std::string payload;    // the message's bytes, or the close reason
};

// The open event's attributes, added to the upgrade request's context (`target` its request target). An
// event stream's also say the topics it asks for (?topic=a&topic=b) and its Last-Event-ID, whose number is
// returned (0: none).
std::uint64_t add_open_event(relay::RequestContext &ctx, std::uint64_t id, std::string_view node, bool sse,
                             std::string_view target, std::string_view last_event_id);

// The context of a message or close event of connection `id` (`data`: what PHP attached to it), a POST to
// `uri` from `remote`.
void event_context(relay::RequestContext &ctx, const PhpEvent &e, std::uint64_t id, std::string_view node,
                   std::string_view data, bool sse, const std::string &remote, std::string uri);
// Its body: the message (a close event has none).
pool::BodyRef event_body(const PhpEvent &e);

// A connection's id as PHP sees it (ferry.ws.id, the targets of its actions): "1.42", loop and number; with a
// broker, the node's name first: "web-1.1.42".
std::string format_id(std::uint64_t id, std::string_view node = {});
std::uint64_t parse_id(std::string_view text); // "1.42" (no node); 0 when not an id
// A target as PHP writes it: "1.42" (this node) or "<node>.1.42"; id 0 when it is neither.
struct Target {
    std::string_view node; // "" when not said
    std::uint64_t id = 0;
    // Held here: no node said, or this node's name.
    bool here(std::string_view own) const { return node.empty() || node == own; }
};
Target parse_target(std::string_view text);

} // namespace ferry::server::detail::ws
