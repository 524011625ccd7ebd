// websockets: WebSockets held in the core (server/src/ws/), their events decided by a pool of PHP workers.
// RoadRunner 2.x's `path` and `allowed_origin` (its `broker` has no meaning here: topics live in the core),
// then Ferry's own limits. The section's presence turns the feature on.
#include "keys.hpp"

namespace ferry::conf::keys {

namespace {

std::optional<schema::Problem> ws_path(const schema::Value &value, const std::string &shown)
{
    const auto &v = std::get<std::string>(value);
    if (v.empty() || v[0] != '/' || v.find_first_of("?# \t") != std::string::npos)
        return schema::Problem{shown + " is not a valid path (expected an absolute path such as \"/ws\")",
                               {}};
    return std::nullopt;
}

std::optional<schema::Problem> sse_path(const schema::Value &value, const std::string &shown)
{
    if (std::get<std::string>(value).empty())
        return std::nullopt;
    return ws_path(value, shown);
}

std::optional<schema::Problem> overflow_policy(const schema::Value &value, const std::string &shown)
{
    const auto &v = std::get<std::string>(value);
    if (v == "drop_oldest" || v == "close")
        return std::nullopt;
    return schema::Problem{shown + " is not a valid value (expected \"drop_oldest\" or \"close\")", {}};
}

} // namespace

const schema::Table<WebsocketsConfig> &websockets()
{
    using namespace schema;
    static const Table<WebsocketsConfig> table{
        {
            string("path", &WebsocketsConfig::path, "an absolute path such as \"/ws\"").checked(ws_path),
            string("allowed_origin", &WebsocketsConfig::allowed_origin,
                   "an origin pattern such as \"https://*.example.com\""),
            size("max_message_size", &WebsocketsConfig::max_message_size,
                 "a positive number of megabytes, or a size such as \"16MB\""),
            duration("ping_interval", &WebsocketsConfig::ping_interval),
            duration("idle_timeout", &WebsocketsConfig::idle_timeout),
            integer("max_queue_messages", &WebsocketsConfig::max_queue_messages, "a positive integer", 1),
            size("max_queue_bytes", &WebsocketsConfig::max_queue_bytes,
                 "a positive number of megabytes, or a size such as \"4MB\""),
            string("overflow", &WebsocketsConfig::overflow, "\"drop_oldest\" or \"close\"")
                .checked(overflow_policy),
            size("max_assembly_memory", &WebsocketsConfig::max_assembly_memory,
                 "a number of megabytes, or a size such as \"64MB\" (0 = no limit)", 0),
            size("max_send_queue_memory", &WebsocketsConfig::max_send_queue_memory,
                 "a number of megabytes, or a size such as \"128MB\" (0 = no limit)", 0),
            duration("message_timeout", &WebsocketsConfig::message_timeout),
            boolean("relay", &WebsocketsConfig::relay),
            string("sse_path", &WebsocketsConfig::sse_path, "an absolute path such as \"/events\", or \"\"")
                .checked(sse_path),
            integer("sse_history", &WebsocketsConfig::sse_history,
                    "a non-negative integer (messages per topic)"),
            duration("sse_heartbeat", &WebsocketsConfig::sse_heartbeat),
            section("pool", &WebsocketsConfig::pool, pool()),
        },
        {"broker"},
        nullptr,
        &WebsocketsConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
