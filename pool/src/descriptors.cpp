#include "ferry/pool/descriptors.hpp"

#include <cerrno>
#include <fstream>
#include <sys/resource.h>

namespace ferry::pool {
namespace {

std::uint64_t nr_open()
{
    std::uint64_t n = 0;
    std::ifstream("/proc/sys/fs/nr_open") >> n;
    return n > 0 ? n : 1024 * 1024;
}

} // namespace

DescriptorLimit raise_descriptor_limit()
{
    DescriptorLimit out;
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        out.error = errno;
        return out;
    }
    out.before = out.soft = rl.rlim_cur;
    out.hard = rl.rlim_max;
    rlim_t target = rl.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(nr_open()) : rl.rlim_max;
    if (target <= rl.rlim_cur)
        return out;
    rlimit raised = rl;
    raised.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
        out.error = errno;
        return out;
    }
    out.soft = target;
    return out;
}

} // namespace ferry::pool
