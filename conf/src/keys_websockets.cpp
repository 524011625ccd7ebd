// websockets: WebSockets held in the core (server/src/ws/), their events decided by a pool of PHP workers.
// RoadRunner 2.x's `path` and `allowed_origin` (its `broker: name` is warned about: topics live in the core;
// Ferry's `broker` section shares them across nodes, keys_broker.cpp), then Ferry's own limits. The section's
// presence turns the feature on.
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
Overflow parse_overflow(std::string_view word)
{
    return word == "close" ? Overflow::close : Overflow::drop_oldest;
}
std::string_view overflow_word(Overflow o)
{
    return o == Overflow::close ? "close" : "drop_oldest";
}

} // namespace

const schema::Table<WebsocketsConfig> &websockets()
{
    using namespace schema;
    static const Table<WebsocketsConfig> table{
        {
            string("path", &WebsocketsConfig::path, "an absolute path such as \"/ws\"")
                .checked(ws_path)
                .described("The upgrade is served on this path (other requests to it go to PHP)."),
            string("allowed_origin", &WebsocketsConfig::allowed_origin,
                   "an origin pattern such as \"https://*.example.com\"")
                .described("The `Origin` accepted: one pattern with `*`, e.g. `https://*.example.com`; empty "
                           "or `*`: any."),
            size("max_message_size", &WebsocketsConfig::max_message_size,
                 "a positive number of megabytes, or a size such as \"16MB\"")
                .described("Ferry's own: a larger message closes the connection with 1009."),
            duration("ping_interval", &WebsocketsConfig::ping_interval)
                .described("A ping after this long without a frame from the client (0: none)."),
            duration("idle_timeout", &WebsocketsConfig::idle_timeout)
                .described("Nothing received (pongs count) this long: close 1001."),
            integer("max_queue_messages", &WebsocketsConfig::max_queue_messages, "a positive integer", 1)
                .described("A connection's send queue, in messages; past it the `overflow` policy applies."),
            size("max_queue_bytes", &WebsocketsConfig::max_queue_bytes,
                 "a positive number of megabytes, or a size such as \"4MB\"")
                .described("A connection's send queue, in bytes; past it the `overflow` policy applies."),
            choice("overflow", &WebsocketsConfig::overflow, parse_overflow, overflow_word, overflow_policy,
                   "\"drop_oldest\" or \"close\"")
                .described("A full send queue: `drop_oldest` (drops the oldest non-control messages) or "
                           "`close` (1008)."),
            size("max_assembly_memory", &WebsocketsConfig::max_assembly_memory,
                 "a number of megabytes, or a size such as \"64MB\" (0 = no limit)", 0)
                .described("Messages being received, all connections together: past it the connection that "
                           "needs more is closed with 1009 (0: no limit)."),
            size("max_send_queue_memory", &WebsocketsConfig::max_send_queue_memory,
                 "a number of megabytes, or a size such as \"128MB\" (0 = no limit)", 0)
                .described("Send queues, all connections together: past it the overflow policy applies (0: "
                           "no limit)."),
            duration("message_timeout", &WebsocketsConfig::message_timeout)
                .described(
                    "A message begun must end within this (pings do not extend it): else 1008 (0: off)."),
            boolean("relay", &WebsocketsConfig::relay)
                .described("Client messages go to the connection's topics, not to PHP."),
            string("sse_path", &WebsocketsConfig::sse_path, "an absolute path such as \"/events\", or \"\"")
                .checked(sse_path)
                .described("Server-sent events on this path (empty: off)."),
            integer("sse_history", &WebsocketsConfig::sse_history,
                    "a non-negative integer (messages per topic)")
                .described("Text messages kept per topic for `Last-Event-ID` resumption (bounded by "
                           "`max_queue_bytes`)."),
            duration("sse_heartbeat", &WebsocketsConfig::sse_heartbeat)
                .described("A comment line this often on each event stream."),
            section("pool", &WebsocketsConfig::pool, pool())
                .described("The websockets workers: the keys of `http.pool`."),
            section("broker", &WebsocketsConfig::broker, broker())
                .described("Topics shared by several Ferry nodes (docs/cluster.md)."),
        },
        {},
        nullptr,
        &WebsocketsConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
