// The document's keys: the version and the sections, and the top-level RoadRunner sections Ferry has no
// feature for yet.
#include "keys.hpp"

#include "ferry/base/text.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace ferry::conf::keys {

std::optional<schema::Problem> one_of(const schema::Value &value, const std::string &shown,
                                      std::initializer_list<std::string_view> allowed,
                                      std::string_view expected, bool empty_ok)
{
    const auto &v = std::get<std::string>(value);
    if (empty_ok && v.empty())
        return std::nullopt;
    for (std::string_view a : allowed)
        if (v == a)
            return std::nullopt;
    return schema::Problem{shown + " is not a valid value (expected " + std::string(expected) + ")", {}};
}

std::optional<schema::Problem> positive_duration(const schema::Value &value, const std::string &shown)
{
    if (std::get<Duration>(value).count() > 0)
        return std::nullopt;
    return schema::Problem{shown + " must be longer than 0 (expected a duration such as \"1s\")", {}};
}

std::optional<std::string> every_interface(const schema::Value &value, const std::string &shown)
{
    const Address &a = std::get<Address>(value);
    in6_addr v6{};
    in_addr v4{};
    const bool any4 = ::inet_pton(AF_INET, a.host.c_str(), &v4) == 1 && v4.s_addr == INADDR_ANY;
    const bool any6 = ::inet_pton(AF_INET6, a.host.c_str(), &v6) == 1 && IN6_IS_ADDR_UNSPECIFIED(&v6);
    if (!any4 && !any6)
        return std::nullopt;
    const std::string local = Address{any4 ? "127.0.0.1" : "::1", a.port}.to_string();
    return shown + " listens on every interface (" + (any4 ? "0.0.0.0" : "::") + "), reachable from other " +
           "machines; write " + quote(local) + " to keep it local";
}

namespace {

std::optional<schema::Problem> supported_version(const schema::Value &value, const std::string &shown)
{
    const std::string &version = std::get<std::string>(value);
    if (version == "3" || version == "2.7") {
        return std::nullopt;
    }
    return schema::Problem{shown + " is not a supported version (expected \"3\" (or \"2.7\"))", {}};
}

} // namespace

const schema::Table<Config> &config()
{
    using namespace schema;
    static const Table<Config> table{
        {
            string("version", &Config::version, "\"3\" (or \"2.7\")")
                .checked(supported_version)
                .warn_if_missing()
                .described("The configuration format: RoadRunner's `\"3\"` (or `\"2.7\"`); anything else is "
                           "refused."),
            section("server", &Config::server, server())
                .described("The PHP workers: the command Ferry starts and their environment."),
            section("http", &Config::http, http())
                .described("The HTTP server: listener, event loops, limits and timeouts, uploads, "
                           "middleware, static files and the worker pool."),
            section("rpc", &Config::rpc, rpc())
                .described("The control socket (RoadRunner's RPC: `ferry workers`, `ferry reset`, `ferry "
                           "stop` and PHP's RPC client reach the server here)."),
            section("reload", &Config::reload, reload())
                .described("The file watcher: present, it resets the workers when a watched file changes "
                           "(development)."),
            section("websockets", &Config::websockets, websockets())
                .described("WebSockets and server-sent events held by the server; PHP authorizes connections "
                           "and handles messages in a pool of its own."),
            section("status", &Config::status, status())
                .described("Health checks: present, `GET /health` and `GET /ready` are served on their own "
                           "address."),
            section("logs", &Config::logs, logs())
                .described("The server's log: absent, info level on stderr in console encoding."),
            section("metrics", &Config::metrics, metrics())
                .described("Prometheus metrics: present, `GET /metrics` is served on its own address."),
        },
        {"broadcast", "kv", "jobs", "grpc", "tcp", "service", "temporal", "otel", "endure", "fileserver",
         "centrifuge", "lock", "redis",
         // the jobs drivers' and the cache middleware's own sections
         "amqp", "beanstalk", "sqs", "nats", "kafka", "boltdb", "memcached", "http_cache"},
    };
    return table;
}

} // namespace ferry::conf::keys
