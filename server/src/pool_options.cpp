#include "pool_options.hpp"

namespace ferry::server::detail {

void apply_pool_config(pool::Options &o, const conf::PoolConfig &c)
{
    o.num_workers = c.num_workers;
    o.max_jobs = c.max_jobs;
    o.fork = c.fork;
    o.fork_fast_exit = c.fork_fast_exit;
    o.recycle_priority = c.recycle_priority;
    o.cpu_affinity = c.cpu_affinity;
    o.allocate_timeout = c.allocate_timeout;
    o.max_queue_size = c.max_queue_size;
    o.destroy_timeout = c.destroy_timeout;
    o.boot_timeout = c.boot_timeout;
    o.reset_timeout = c.reset_timeout;
    o.max_recycling = c.max_recycling;
    o.exec_ttl = c.exec_ttl;
    o.client_gone_ttl = c.client_gone_ttl;
    o.exec_warn = c.exec_warn;
    o.watch_tick = c.watch_tick;
    o.ttl = c.ttl;
    o.idle_ttl = c.idle_ttl;
    o.max_worker_memory = c.max_worker_memory;
    o.debug = c.debug;
}

} // namespace ferry::server::detail
