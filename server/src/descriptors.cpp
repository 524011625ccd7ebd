#include "descriptors.hpp"

#include "ferry/base/log.hpp"
#include "ferry/pool/descriptors.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <dirent.h>
#include <string>
#include <sys/resource.h>

namespace ferry::server::detail {
namespace {

const char *user_name(FdUser u)
{
    return u == FdUser::accept ? "accepting connections" : "opening static files";
}

} // namespace

void DescriptorRefusals::exhausted(FdUser where, int error)
{
    refused_[static_cast<std::size_t>(where)].fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t total = total_.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    std::int64_t last = last_log_ms_.load(std::memory_order_relaxed);
    if (now - last < static_cast<std::int64_t>(descriptor_log_interval_ms) ||
        !last_log_ms_.compare_exchange_strong(last, now, std::memory_order_relaxed))
        return; // within the burst already logged, or another thread logs it
    const std::uint64_t before = logged_total_.exchange(total, std::memory_order_relaxed);
    const long open = open_descriptors();
    log::warn("core", std::string("out of descriptors (") + std::strerror(error) + ") while " +
                          user_name(where) + ": " + std::to_string(total - before) +
                          " refusal(s) since the last such line; " +
                          (open >= 0 ? std::to_string(open) : std::string("all")) + " open of a limit of " +
                          std::to_string(descriptor_soft_limit()) +
                          " (static files answer 503 and accepting pauses 100 ms until some close; next "
                          "line in 10 s at the earliest)");
}

pool::DescriptorLimit prepare_descriptor_limit()
{
    const pool::DescriptorLimit l = pool::raise_descriptor_limit();
    if (l.error != 0)
        log::warn("core", "descriptors: cannot raise the soft limit of " + std::to_string(l.soft) +
                              " to the hard limit of " + std::to_string(l.hard) + ": " +
                              std::strerror(l.error));
    else if (l.soft > l.before)
        log::info("core", "descriptors: soft limit raised from " + std::to_string(l.before) + " to " +
                              std::to_string(l.soft) + " (workers start with " + std::to_string(l.before) +
                              ")");
    else
        log::info("core", "descriptors: soft limit " + std::to_string(l.soft) + " (the hard limit)");
    return l;
}

std::size_t static_cache_capacity(std::uint64_t soft_limit, unsigned loops, unsigned configured)
{
    const std::uint64_t share = soft_limit / 4 / std::max(1u, loops);
    const std::size_t capacity =
        static_cast<std::size_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(share, configured)));
    if (capacity < configured)
        log::info("static", "the file cache keeps at most " + std::to_string(capacity) +
                                " open file(s) per event loop (http.static.max_open_files: " +
                                std::to_string(configured) + "), a quarter of the descriptor limit of " +
                                std::to_string(soft_limit) + " for all loops");
    return capacity;
}

long open_descriptors()
{
    DIR *d = ::opendir("/proc/self/fd");
    if (d == nullptr)
        return -1;
    long n = 0;
    while (const dirent *e = ::readdir(d))
        if (e->d_name[0] != '.')
            ++n;
    ::closedir(d);
    return n - 1; // the directory's own descriptor
}

std::uint64_t descriptor_soft_limit()
{
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    return rl.rlim_cur;
}

} // namespace ferry::server::detail
