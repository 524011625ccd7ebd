// websockets.broker (Ferry's own; server/src/broker/, docs/cluster.md): where WebSocket and SSE topics are
// shared. RoadRunner names a broadcast plugin's broker here with a string ("default"): that form is warned
// about and ignored (websockets() takes it as a scalar).
#include "keys.hpp"
#include "values.hpp"

#include <cctype>

namespace ferry::conf::keys {

namespace {

std::optional<schema::Problem> redis_addresses(const schema::Value &value, const std::string &)
{
    const auto &list = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < list.size(); ++i) {
        const detail::Parsed<Address> a = detail::parse_address(list[i]);
        if (!a || a->port == 0 || list[i].front() == ':')
            return schema::Problem{"\"" + list[i] +
                                       "\" is not a valid address (expected \"host:port\", e.g. "
                                       "\"127.0.0.1:6379\")",
                                   i};
    }
    return std::nullopt;
}

// Channel names and keys start with it: printable, no spaces (a Redis key may hold anything, but a prefix
// someone types with a space or a control character in it is a mistake).
std::optional<schema::Problem> key_prefix(const schema::Value &value, const std::string &shown)
{
    for (unsigned char c : std::get<std::string>(value))
        if (c <= 0x20 || c == 0x7f)
            return schema::Problem{
                shown + " is not a valid prefix (expected printable characters, no spaces)", {}};
    return std::nullopt;
}

// A node's name goes into connection ids ("<node>.<loop>.<n>"): letters, digits, '-' and '_', at most 32.
std::optional<schema::Problem> node_name(const schema::Value &value, const std::string &shown)
{
    const auto &v = std::get<std::string>(value);
    bool ok = v.size() <= 32;
    for (unsigned char c : v)
        ok = ok && (std::isalnum(c) || c == '-' || c == '_');
    if (ok)
        return std::nullopt;
    return schema::Problem{
        shown + " is not a valid node name (expected at most 32 letters, digits, '-' or '_')", {}};
}

void resolve(BrokerConfig &b)
{
    b.servers.clear();
    for (const std::string &a : b.addrs)
        if (auto parsed = detail::parse_address(a))
            b.servers.push_back(std::move(*parsed));
}

} // namespace

const schema::Table<BrokerConfig> &broker()
{
    using namespace schema;
    static const Table<BrokerConfig> table =
        Table<BrokerConfig>{
            {
                string("driver", &BrokerConfig::driver, "\"memory\" or \"redis\"")
                    .checked([](const schema::Value &v, const std::string &shown) {
                        return one_of(v, shown, {"memory", "redis"}, "\"memory\" or \"redis\"");
                    })
                    .described("`memory`: topics are this process's; `redis`: every node's, through Redis "
                               "pub/sub (docs/cluster.md)."),
                list("addrs", &BrokerConfig::addrs, "a list of \"host:port\"", 1)
                    .checked(redis_addresses)
                    .described("The Redis server; more than one: tried in turn when one fails."),
                string("prefix", &BrokerConfig::prefix, "a prefix such as \"ferry:\"")
                    .checked(key_prefix)
                    .described("Redis channels and keys start with it (several clusters on one Redis)."),
                string("password", &BrokerConfig::password, "a password, e.g. \"${REDIS_PASSWORD}\"")
                    .described("Sent with AUTH when set (Redis's requirepass)."),
                string("node", &BrokerConfig::node, "a name such as \"web-1\"")
                    .checked(node_name)
                    .described("This node's name in connection ids (`<node>.<loop>.<n>`); empty: a random "
                               "one at each start."),
                duration("connect_timeout", &BrokerConfig::connect_timeout)
                    .checked(positive_duration)
                    .described("A connection to Redis and its first answer must come within this."),
            },
            {},
            resolve,
        }
            .taking_scalar("names a RoadRunner broadcast broker: Ferry's topics live in the core; to share "
                           "them across nodes write broker: {driver: redis, addrs: [\"host:port\"]}");
    return table;
}

} // namespace ferry::conf::keys
