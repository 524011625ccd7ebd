// Running out of descriptors (internal to server/): the count of refusals for /metrics and one log line per
// burst, from any loop (accept, the static file cache), in one server-wide object (ServerCounters). See also
// ferry/pool/descriptors.hpp for the limit.
#pragma once

#include "ferry/pool/descriptors.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::server::detail {

enum class FdUser { accept, static_files, count_ };

constexpr std::uint64_t descriptor_log_interval_ms = 10'000;

class DescriptorRefusals {
public:
    // One open(2) or accept(2) refused with EMFILE or ENFILE: counted, and logged at most once per
    // descriptor_log_interval_ms (with how many were refused meanwhile). Thread-safe.
    void exhausted(FdUser where, int error);
    // Refusals so far, for ferry_descriptor_exhaustion_total.
    std::uint64_t count(FdUser where) const
    {
        return refused_[static_cast<std::size_t>(where)].load(std::memory_order_relaxed);
    }

private:
    std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(FdUser::count_)> refused_{};
    std::atomic<std::uint64_t> total_{0};
    std::atomic<std::uint64_t> logged_total_{0};        // total_ at the last log line
    std::atomic<std::int64_t> last_log_ms_{-1'000'000}; // steady clock, ms
};

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
