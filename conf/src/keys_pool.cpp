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

// fork: True and FALSE as a boolean key reads them, or "php".
Fork parse_fork(std::string_view word)
{
    if (const std::optional<bool> b = schema::yaml_bool(word))
        return *b ? Fork::app : Fork::off;
    return Fork::php;
}
std::string_view fork_word(Fork f)
{
    return f == Fork::app ? "true" : f == Fork::php ? "php" : "false";
}

RecyclePriority parse_recycle_priority(std::string_view word)
{
    return word == "idle"     ? RecyclePriority::idle
           : word == "normal" ? RecyclePriority::normal
                              : RecyclePriority::automatic;
}
std::string_view recycle_priority_word(RecyclePriority p)
{
    return p == RecyclePriority::idle ? "idle" : p == RecyclePriority::normal ? "normal" : "auto";
}

CpuAffinity parse_cpu_affinity(std::string_view word)
{
    return word == "off" ? CpuAffinity::off : CpuAffinity::automatic;
}
std::string_view cpu_affinity_word(CpuAffinity a)
{
    return a == CpuAffinity::off ? "off" : "auto";
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
            duration("exec_ttl", &PoolConfig::exec_ttl)
                .described("A request running longer gets 504 and its worker is killed (0: off); a streamed "
                           "response is timed until its head."),
            duration("client_gone_ttl", &PoolConfig::client_gone_ttl)
                .described("Ferry's own: a request whose client closed or reset its connection may run this "
                           "long more; then its worker is killed and replaced (0: until `exec_ttl`)."),
            duration("exec_warn", &PoolConfig::exec_warn)
                .described("Ferry's own: log a request running longer than this (0: off)."),
            duration("watch_tick", &PoolConfig::watch_tick)
                .checked(positive_duration)
                .described("How often `ttl`, `idle_ttl` and `max_worker_memory` are checked."),
            duration("ttl", &PoolConfig::ttl)
                .described("A worker's lifetime; then it is replaced between requests (0: unlimited)."),
            duration("idle_ttl", &PoolConfig::idle_ttl)
                .described("A worker idle this long after its first request is replaced (0: unlimited)."),
            size("max_worker_memory", &PoolConfig::max_worker_memory,
                 "a number of megabytes, or a size such as \"256MB\"; 0 = unlimited", 0)
                .described("A worker whose RSS passes this is replaced between requests (0: unlimited)."),
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
            integer("num_workers", &PoolConfig::num_workers, "a non-negative integer")
                .described("PHP workers; 0: the CPUs this process may run on."),
            integer("max_jobs", &PoolConfig::max_jobs, "a non-negative integer; 0 = unlimited")
                .described("A worker is replaced after this many requests (0: never)."),
            choice("fork", &PoolConfig::fork, parse_fork, fork_word, fork_mode, fork_expected)
                .described("Ferry's own: `true` forks workers from a template process, after the app's boot "
                           "for Ferry's PHP library (after PHP's start for other workers); `php` always "
                           "after PHP's start; `false` starts each worker with the command."),
            boolean("fork_fast_exit", &PoolConfig::fork_fast_exit)
                .described("Ferry's own: a stopped forked worker ends with `_exit(0)` after PHP's request "
                           "shutdown, without the engine's teardown."),
            choice("recycle_priority", &PoolConfig::recycle_priority, parse_recycle_priority,
                   recycle_priority_word, recycle_priority, recycle_priority_expected)
                .described("Ferry's own: `idle` boots replacements and ends retired workers under "
                           "`SCHED_IDLE` (needs `CAP_SYS_NICE` or `RLIMIT_NICE` 20); `normal` never; `auto`: "
                           "normal when workers are pinned, else idle when allowed."),
            choice("cpu_affinity", &PoolConfig::cpu_affinity, parse_cpu_affinity, cpu_affinity_word,
                   cpu_affinity, cpu_affinity_expected)
                .described("Ferry's own: `auto` pins each worker to one CPU once booted (with at least 2 "
                           "CPUs and no more workers than CPUs) and each event loop beside its workers; "
                           "`off` leaves them to the scheduler."),
            duration("allocate_timeout", &PoolConfig::allocate_timeout)
                .described("How long a request waits for a free worker; then 503."),
            integer("max_queue_size", &PoolConfig::max_queue_size, "a non-negative integer; 0 = no limit")
                .described("Requests waiting for a worker (all loops) beyond which 503 comes at once (0: no "
                           "limit)."),
            duration("destroy_timeout", &PoolConfig::destroy_timeout)
                .described("The whole graceful stop; what is left after it is killed."),
            duration("boot_timeout", &PoolConfig::boot_timeout)
                .described("Ferry's own: one worker's start and PID handshake."),
            duration("reset_timeout", &PoolConfig::reset_timeout)
                .described("A rolling reset waits this long for a busy old worker, then kills it (its client "
                           "gets 503)."),
            integer("max_recycling", &PoolConfig::max_recycling,
                    "a non-negative integer; 0 = num_workers / 4")
                .described("Ferry's own: workers replaced at once per loop (reset, supervisor); 0: "
                           "`num_workers` / 4, at least 1."),
            boolean("debug", &PoolConfig::debug)
                .described("A fresh worker for every request, stopped after it (development)."),
            group("supervisor", supervisor())
                .described("Limits on each worker, checked between requests or every `watch_tick`."),
        },
        {"stream_timeout", "command", "dynamic_allocator"},
        resolve_pool,
    };
    return table;
}

} // namespace ferry::conf::keys
