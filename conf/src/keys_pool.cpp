// http.pool: the PHP worker pool (size, recycling, allocation and stop timeouts) and its supervisor.
// num_workers: 0 is resolved here, once, to the number of CPUs this process may run on; nothing downstream
// sees a 0.
#include "keys.hpp"

#include <algorithm>

namespace ferry::conf::keys {

namespace {

void resolve_pool(PoolConfig &pool)
{
    if (pool.num_workers == 0) {
        pool.num_workers = usable_cpus();
    }
    if (const std::optional<bool> b = schema::yaml_bool(pool.fork)) { // fork: True, as a boolean key reads it
        pool.fork = *b ? "true" : "false";
    }
    if (pool.max_recycling == 0) {
        pool.max_recycling = std::max(1u, pool.num_workers / 4);
    }
}

constexpr std::string_view fork_expected = "true, false or \"php\"";

std::optional<schema::Problem> fork_mode(const schema::Value &value, const std::string &shown)
{
    if (schema::yaml_bool(std::get<std::string>(value))) {
        return std::nullopt;
    }
    return one_of(value, shown, {"php"}, fork_expected);
}

constexpr std::string_view recycle_priority_expected = "\"auto\", \"idle\" or \"normal\"";

std::optional<schema::Problem> recycle_priority(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown, {"auto", "idle", "normal"}, recycle_priority_expected);
}

constexpr std::string_view cpu_affinity_expected = "\"auto\" or \"off\"";

std::optional<schema::Problem> cpu_affinity(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown, {"auto", "off"}, cpu_affinity_expected);
}

const schema::Table<PoolConfig> &supervisor()
{
    using namespace schema;
    static const Table<PoolConfig> table{
        {
            duration("exec_ttl", &PoolConfig::exec_ttl),
            duration("client_gone_ttl", &PoolConfig::client_gone_ttl),
            duration("exec_warn", &PoolConfig::exec_warn),
            duration("watch_tick", &PoolConfig::watch_tick).checked(positive_duration),
            duration("ttl", &PoolConfig::ttl),
            duration("idle_ttl", &PoolConfig::idle_ttl),
            size("max_worker_memory", &PoolConfig::max_worker_memory,
                 "a number of megabytes, or a size such as \"256MB\"; 0 = unlimited", 0),
        },
        {},
    };
    return table;
}

} // namespace

const schema::Table<PoolConfig> &pool()
{
    using namespace schema;
    static const Table<PoolConfig> table{
        {
            integer("num_workers", &PoolConfig::num_workers, "a non-negative integer"),
            integer("max_jobs", &PoolConfig::max_jobs, "a non-negative integer; 0 = unlimited"),
            string("fork", &PoolConfig::fork, fork_expected).checked(fork_mode),
            boolean("fork_fast_exit", &PoolConfig::fork_fast_exit),
            string("recycle_priority", &PoolConfig::recycle_priority, recycle_priority_expected)
                .checked(recycle_priority),
            string("cpu_affinity", &PoolConfig::cpu_affinity, cpu_affinity_expected).checked(cpu_affinity),
            duration("allocate_timeout", &PoolConfig::allocate_timeout),
            integer("max_queue_size", &PoolConfig::max_queue_size, "a non-negative integer; 0 = no limit"),
            duration("destroy_timeout", &PoolConfig::destroy_timeout),
            duration("boot_timeout", &PoolConfig::boot_timeout),
            duration("reset_timeout", &PoolConfig::reset_timeout),
            integer("max_recycling", &PoolConfig::max_recycling,
                    "a non-negative integer; 0 = num_workers / 4"),
            boolean("debug", &PoolConfig::debug),
            group("supervisor", supervisor()),
        },
        {"stream_timeout", "command", "dynamic_allocator"},
        resolve_pool,
    };
    return table;
}

} // namespace ferry::conf::keys
