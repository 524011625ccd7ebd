// What a websockets worker answers to an event (docs/protocol.md §9; internal to server/): a list of
// actions in the reply body, as a JSON array, then optionally a NUL byte and the messages' bytes, which the
// actions take in order by their "size" (binary-safe without base64 or escaping).
#pragma once

#include "ferry/base/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail::ws {

enum class Op { send, publish, join, leave, close, data };

struct Action {
    Op op = Op::send;
    // send, close: connection ids; publish, join, leave: topics
    std::vector<std::string> targets;
    bool to_self = false; // send, close without "to": the connection of the event ("to": [] is nobody)
    bool binary = false;
    std::string_view payload;  // send, publish: a view into the reply body
    bool exclude_self = false; // publish: not to the connection of the event
    std::uint16_t code = 1000; // close
    std::string reason;        // close (at most 123 bytes are sent)
    std::string value;         // data: replaces the data attached to the connection; send/publish: "text"
    bool inline_text = false;  // send, publish: the message came as "text" (payload views `value`)
};

// Parses `body` (empty: no action). The error names the action and what is wrong with it.
Result<std::vector<Action>> parse_actions(std::string_view body);

} // namespace ferry::server::detail::ws
