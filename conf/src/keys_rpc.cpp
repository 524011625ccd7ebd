// rpc: the control listener (server/src/control/; docs/protocol.md §6). RoadRunner's `listen`, and Ferry's
// `allow_remote`: whoever reaches the listener controls the workers, so only loopback TCP addresses and unix
// sockets are taken unless it is set; and `first_byte_timeout`: idle sockets must not lock callers out.
#include "keys.hpp"
#include "values.hpp"

namespace ferry::conf::keys {

namespace {

std::optional<schema::Problem> rpc_address(const schema::Value &value, const std::string &shown)
{
    const auto &v = std::get<std::string>(value);
    if (v.empty())
        return std::nullopt;
    if (v.rfind("unix://", 0) == 0) {
        if (v.size() > 7 + 107)
            return schema::Problem{shown + " is too long for a unix socket path (at most 107 bytes)", {}};
        if (v.size() == 7)
            return schema::Problem{shown + " has no path (expected e.g. \"unix:///run/ferry.sock\")", {}};
        return std::nullopt;
    }
    if (v.rfind("tcp://", 0) == 0) {
        if (auto parsed = detail::parse_address(std::string_view(v).substr(6)); parsed)
            return std::nullopt;
        return schema::Problem{shown + " is not a valid TCP address (expected e.g. \"tcp://127.0.0.1:6001\")",
                               {}};
    }
    return schema::Problem{shown + " is not a valid value (expected \"tcp://host:port\" or \"unix:///path\")",
                           {}};
}

} // namespace

const schema::Table<RpcConfig> &rpc()
{
    using namespace schema;
    static const Table<RpcConfig> table{
        {
            string("listen", &RpcConfig::listen, "\"tcp://127.0.0.1:6001\" or \"unix:///path\"")
                .checked(rpc_address)
                .described("Where the control socket listens: `tcp://host:port` or `unix:///path` (mode "
                           "0600); `none` or empty: no listener. On `status.address` or `metrics.address` "
                           "(as written there): one admin port, RPC calls told apart by their first byte."),
            boolean("allow_remote", &RpcConfig::allow_remote)
                .described("Ferry's own: allow `listen` on an address other than loopback (warned)."),
            duration("first_byte_timeout", &RpcConfig::first_byte_timeout)
                .checked(positive_duration)
                .described("Ferry's own: a connection that sends nothing this long is closed (64 connections "
                           "at most; the oldest idle one makes room for a new caller)."),
        },
    };
    return table;
}

} // namespace ferry::conf::keys
