#include "priority.hpp"

#include <cerrno>
#include <sched.h>
#include <sys/resource.h>
#include <thread>

namespace ferry::pool::detail {
namespace {

bool set_policy(int pid, int policy) noexcept
{
    sched_param p{};
    return ::sched_setscheduler(pid, policy, &p) == 0;
}

// On the calling thread: into SCHED_IDLE and out again.
bool round_trip()
{
    sched_param p{};
    if (::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &p) != 0)
        return false;
    return ::pthread_setschedparam(::pthread_self(), SCHED_OTHER, &p) == 0;
}

bool probe()
{
    bool ok = false;
    std::thread t([&] { ok = round_trip(); });
    t.join();
    return ok;
}

} // namespace

bool can_restore()
{
    if (probe())
        return true;
    // The kernel lets a task leave SCHED_IDLE when RLIMIT_NICE would let it set its nice value: 20 - nice.
    rlimit lim{};
    if (::getrlimit(RLIMIT_NICE, &lim) != 0 || lim.rlim_cur == lim.rlim_max)
        return false;
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, 0);
    if (errno != 0)
        return false;
    const rlim_t need = static_cast<rlim_t>(20 - nice);
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need)
        return false;
    const rlimit raised{lim.rlim_max, lim.rlim_max};
    if (::setrlimit(RLIMIT_NICE, &raised) != 0)
        return false;
    if (probe())
        return true;
    ::setrlimit(RLIMIT_NICE, &lim);
    return false;
}

bool set_idle(int pid) noexcept
{
    return set_policy(pid, SCHED_IDLE);
}

bool set_normal(int pid) noexcept
{
    return set_policy(pid, SCHED_OTHER);
}

} // namespace ferry::pool::detail
