// server: how the PHP workers are started (the command, their environment, the relay).
#include "keys.hpp"

namespace ferry::conf::keys {

namespace {

std::optional<schema::Problem> program_named(const schema::Value &value, const std::string &)
{
    if (std::get<std::vector<std::string>>(value).front().empty()) {
        return schema::Problem{"an empty program name is not a valid value (expected a program)", 0};
    }
    return std::nullopt;
}

std::optional<schema::Problem> pipes_only(const schema::Value &value, const std::string &shown)
{
    if (std::get<std::string>(value) == "pipes") {
        return std::nullopt;
    }
    return schema::Problem{shown + " is not supported (only \"pipes\" is supported)", {}};
}

} // namespace

const schema::Table<ServerConfig> &server()
{
    using namespace schema;
    static const Table<ServerConfig> table{
        {
            list("command", &ServerConfig::command,
                 "the PHP worker command, e.g. \"php worker.php\", or a list of arguments", 1)
                .checked(program_named)
                .required_as("the PHP worker command", "\"php worker.php\"")
                .described("The worker command: a string split on spaces, or a list of arguments; started in "
                           "the working directory (`-w`)."),
            env("env", &ServerConfig::env)
                .described("Variables added to the workers' environment (a map, or RoadRunner's list of `- "
                           "KEY: value`; names upper-cased), besides `RR_RELAY`, "
                           "`RR_MODE`, `RR_VERSION`, `RR_RPC`, `FERRY_VERSION` and `FERRY_PHP_WORKER` (the "
                           "directory of Ferry's PHP library) that Ferry sets."),
            string("relay", &ServerConfig::relay, "\"pipes\"")
                .checked(pipes_only)
                .described("How workers are reached: `pipes` (their stdin and stdout) is the only relay."),
        },
        {"on_init", "after_init", "user", "group", "relay_timeout"},
    };
    return table;
}

} // namespace ferry::conf::keys
