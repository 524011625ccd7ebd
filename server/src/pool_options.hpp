// A pool section of the configuration (http.pool, websockets.pool) as the pool library's options (internal
// to server/: conf and pool do not know each other).
#pragma once

#include "ferry/conf/config.hpp"
#include "ferry/pool/pool.hpp"

namespace ferry::server::detail {

void apply_pool_config(pool::Options &o, const conf::PoolConfig &c);

} // namespace ferry::server::detail
