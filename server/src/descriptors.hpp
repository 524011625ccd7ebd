// Running out of descriptors (internal to server/): the count of refusals for /metrics and one log line per
// burst, from any loop (accept, the static file cache). See also ferry/pool/descriptors.hpp for the limit.
#pragma once

#include "ferry/pool/descriptors.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::server::detail {

enum class FdUser { accept, static_files, count_ };

// One open(2) or accept(2) refused with EMFILE or ENFILE: counted, and logged at most once per
// `log_interval` (with how many were refused meanwhile). Thread-safe.
void descriptors_exhausted(FdUser where, int error);
constexpr std::uint64_t descriptor_log_interval_ms = 10'000;

// Refusals so far, for ferry_descriptor_exhaustion_total.
std::uint64_t descriptor_exhaustions(FdUser where);

// At start: raises the soft RLIMIT_NOFILE to the hard one (ferry::pool::raise_descriptor_limit) and logs the
// figure ("descriptors: soft limit raised from 128 to 4096"). Gives the limits before and now.
pool::DescriptorLimit prepare_descriptor_limit();

// How many files one loop's static file cache may keep open: http.static.max_open_files, but with all the
// loops together at most a quarter of the descriptor limit (the rest is for connections and workers' pipes);
// logged when that lowers it.
std::size_t static_cache_capacity(std::uint64_t soft_limit, unsigned loops, unsigned configured);

// Descriptors open now (entries of /proc/self/fd), -1 if unknown; the soft RLIMIT_NOFILE.
long open_descriptors();
std::uint64_t descriptor_soft_limit();

} // namespace ferry::server::detail
