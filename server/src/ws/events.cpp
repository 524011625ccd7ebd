#include "ws/events.hpp"

#include "ferry/server/http_grammar.hpp"

#include <boost/json.hpp>

#include <charconv>

namespace ferry::server::detail::ws {

std::string format_id(std::uint64_t id, std::string_view node)
{
    std::string out;
    if (!node.empty())
        out.append(node).push_back('.');
    return out + std::to_string(id >> 40) + "." + std::to_string(id & ((std::uint64_t(1) << 40) - 1));
}

Target parse_target(std::string_view s)
{
    // "<loop>.<n>" or "<node>.<loop>.<n>": a node's name has no dot (websockets.broker.node).
    const auto first = s.find('.');
    if (first != std::string_view::npos && s.find('.', first + 1) != std::string_view::npos) {
        Target t{s.substr(0, first), parse_id(s.substr(first + 1))};
        return t.node.empty() ? Target{} : t;
    }
    return Target{{}, parse_id(s)};
}

std::uint64_t parse_id(std::string_view s)
{
    auto dot = s.find('.');
    if (dot == std::string_view::npos)
        return 0;
    std::uint64_t loop = 0, n = 0;
    auto [p1, e1] = std::from_chars(s.data(), s.data() + dot, loop);
    auto [p2, e2] = std::from_chars(s.data() + dot + 1, s.data() + s.size(), n);
    if (e1 != std::errc() || e2 != std::errc() || p1 != s.data() + dot || p2 != s.data() + s.size() ||
        loop == 0 || loop >= (1u << 20) || n >= (std::uint64_t(1) << 40))
        return 0;
    return (loop << 40) | n;
}

std::uint64_t add_open_event(relay::RequestContext &ctx, std::uint64_t id, std::string_view node, bool sse,
                             std::string_view target, std::string_view last_event_id)
{
    ctx.attributes = {{"ferry.ws.event", "open"}, {"ferry.ws.id", format_id(id, node)}};
    if (!sse)
        return 0;
    // What the client asks for (?topic=a&topic=b); it reads only the topics PHP joins it to.
    boost::json::array topics;
    for (auto &t : query_values(target, "topic"))
        topics.emplace_back(t);
    ctx.attributes.emplace_back("ferry.ws.transport", "sse");
    ctx.attributes.emplace_back("ferry.sse.topics", boost::json::serialize(topics));
    ctx.attributes.emplace_back("ferry.sse.last_event_id", std::string(last_event_id));
    std::uint64_t after = 0;
    std::from_chars(last_event_id.data(), last_event_id.data() + last_event_id.size(), after);
    return after;
}

void event_context(relay::RequestContext &ctx, const PhpEvent &e, std::uint64_t id, std::string_view node,
                   std::string_view data, bool sse, const std::string &remote, std::string uri)
{
    ctx.remote_addr = remote;
    ctx.protocol = "HTTP/1.1";
    ctx.method = "POST";
    ctx.uri = std::move(uri);
    ctx.attributes.reserve(5);
    ctx.attributes.emplace_back("ferry.ws.event", e.close ? "close" : "message");
    ctx.attributes.emplace_back("ferry.ws.id", format_id(id, node));
    ctx.attributes.emplace_back("ferry.ws.data", std::string(data));
    if (sse)
        ctx.attributes.emplace_back("ferry.ws.transport", "sse");
    if (e.close) {
        ctx.attributes.emplace_back("ferry.ws.code", std::to_string(e.code));
        ctx.attributes.emplace_back("ferry.ws.reason", e.payload);
    } else {
        ctx.attributes.emplace_back("ferry.ws.type", e.binary ? "binary" : "text");
    }
}

pool::BodyRef event_body(const PhpEvent &e)
{
    pool::BodyRef body;
    if (!e.close) {
        body.memory = e.payload;
        body.size = e.payload.size();
    }
    return body;
}

} // namespace ferry::server::detail::ws
