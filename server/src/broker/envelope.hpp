// What one Ferry node tells the others through the broker (internal to server/; docs/cluster.md, "On the
// wire"): a message published to topics, sent to connections or a close of connections, with the node it
// comes from. msgpack (msgpack-cxx), an array whose first item is the format's version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail::broker {

struct Envelope {
    enum class Kind : std::uint8_t { publish = 0, send = 1, close = 2 };
    Kind kind = Kind::publish;
    std::string origin;              // the node that published it (its own copies it skips)
    std::vector<std::string> topics; // publish: every topic of the message
    std::uint32_t topic = 0;         // publish: the topic of this copy (an index in topics)
    std::vector<std::uint64_t> ids;  // send, close: connections of the node it is sent to
    bool binary = false;             // publish, send
    std::uint64_t event_id = 0;      // publish: its SSE event id (0: none)
    std::string payload;             // publish, send: the message; close: the reason
    std::uint16_t code = 1000;       // close

    static constexpr unsigned version = 1;
};

// With `payload` in place of e.payload (the publisher's frame, not copied into the envelope first).
std::string encode(const Envelope &e, std::string_view payload);
inline std::string encode(const Envelope &e)
{
    return encode(e, e.payload);
}
// nullopt, with `why`, for bytes that are not an envelope of this version.
std::optional<Envelope> decode(std::string_view bytes, std::string &why);

// The payload of one unmasked frame made by ws::make_frame, and whether it is binary; false for anything
// else.
bool frame_payload(std::string_view frame, std::string_view &payload, bool &binary);

} // namespace ferry::server::detail::broker
