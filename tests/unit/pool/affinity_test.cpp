// detail::CpuPins (Options::cpu_affinity): even spread, a released CPU goes to the next worker, refusals,
// the pools' reservations (no more pinned workers than CPUs together),
// conf::usable_cpu_list() (the CPUs it spreads over) and a real process pinned with sched_setaffinity(2).
#include "affinity.hpp"

#include "ferry/conf/config.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <map>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using ferry::pool::detail::CpuPins;

namespace {

struct Recorder {
    std::map<int, int> applied; // pid → cpu, as the kernel would have it
    int refuse_errno = 0;
    CpuPins::Apply apply()
    {
        return [this](int pid, int cpu) {
            if (refuse_errno != 0) {
                errno = refuse_errno;
                return false;
            }
            applied[pid] = cpu;
            return true;
        };
    }
};

} // namespace

TEST(CpuPins, SpreadsEvenlyLowestFirst)
{
    Recorder r;
    CpuPins pins({2, 5, 7}, r.apply());
    EXPECT_EQ(pins.pin(100), 2);
    EXPECT_EQ(pins.pin(101), 5);
    EXPECT_EQ(pins.pin(102), 7);
    EXPECT_EQ(pins.pin(103), 2); // a fourth worker: back to the lowest
    EXPECT_EQ(pins.counted(2), 2u);
    EXPECT_EQ(pins.counted(5), 1u);
    EXPECT_EQ(r.applied.at(103), 2);
}

TEST(CpuPins, AReplacementGetsTheCpuItsPredecessorReleased)
{
    Recorder r;
    CpuPins pins({0, 1}, r.apply());
    ASSERT_EQ(pins.pin(10), 0);
    ASSERT_EQ(pins.pin(11), 1);
    pins.release(11); // marked for replacement: it still runs, but its CPU is free
    EXPECT_EQ(pins.pin(12), 1);
    pins.release(10);
    pins.release(10); // twice, and unknown pids: no effect
    pins.release(999);
    EXPECT_EQ(pins.pin(13), 0);
    EXPECT_EQ(pins.counted(0), 1u);
    EXPECT_EQ(pins.counted(1), 1u);
}

TEST(CpuPins, EachLoopGetsEveryLoopsThCpu)
{
    const std::vector<int> cpus{0, 1, 2, 3, 4, 5, 6, 7};
    EXPECT_EQ(CpuPins::loop_cpus(cpus, 0, 4), (std::vector<int>{0, 4})); // hardware threads of one core
    EXPECT_EQ(CpuPins::loop_cpus(cpus, 3, 4), (std::vector<int>{3, 7}));
    EXPECT_EQ(CpuPins::loop_cpus(cpus, 1, 8), (std::vector<int>{1}));
    EXPECT_EQ(CpuPins::loop_cpus({2, 5, 7}, 0, 2),
              (std::vector<int>{2, 7})); // uneven: the first loop gets more
    EXPECT_EQ(CpuPins::loop_cpus({2, 5, 7}, 1, 2), (std::vector<int>{5}));
    EXPECT_TRUE(CpuPins::loop_cpus(cpus, 0, 1).empty());   // one loop: nothing to split
    EXPECT_TRUE(CpuPins::loop_cpus({0, 1}, 0, 3).empty()); // more loops than CPUs: no split
    EXPECT_TRUE(CpuPins::loop_cpus(cpus, 4, 4).empty());   // no such loop
    EXPECT_TRUE(CpuPins::loop_cpus({}, 0, 2).empty());
}

TEST(CpuPins, MaskAndListOfACpuList)
{
    const cpu_set_t set = ferry::pool::detail::cpu_mask({0, 2, 5, -1, CPU_SETSIZE}); // out of range: ignored
    EXPECT_EQ(CPU_COUNT(&set), 3);
    EXPECT_TRUE(CPU_ISSET(0, &set) && CPU_ISSET(2, &set) && CPU_ISSET(5, &set));
    EXPECT_EQ(ferry::pool::detail::cpu_list({0, 2, 5}), "0,2,5");
    EXPECT_EQ(ferry::pool::detail::cpu_list({}), "");
}

TEST(CpuPins, AWorkerGoesToItsLoopsCpusWhileTheSpreadAllows)
{
    Recorder r;
    CpuPins pins({0, 1, 2, 3}, r.apply());
    const auto loop0 = CpuPins::loop_cpus(pins.cpus(), 0, 2); // 0, 2
    const auto loop1 = CpuPins::loop_cpus(pins.cpus(), 1, 2); // 1, 3
    EXPECT_EQ(pins.pin(10, loop1), 1);
    EXPECT_EQ(pins.pin(11, loop1), 3);
    EXPECT_EQ(pins.pin(12, loop0), 0); // not CPU 1 or 3, and 0 before 2
    EXPECT_EQ(pins.pin(13, loop1), 2); // its loop's CPUs have a worker each and CPU 2 none: the spread first
    pins.release(12);
    EXPECT_EQ(pins.pin(14, loop0), 0); // a replacement gets the CPU its predecessor released
    pins.release(10);
    EXPECT_EQ(pins.pin(15, loop0), 1); // the only free CPU, though not its loop's
    EXPECT_EQ(pins.pin(16), 0);        // no set: the lowest of the least loaded
    EXPECT_EQ(r.applied.at(13), 2);
}

TEST(CpuPins, PinningTheSamePidAgainCountsItOnce)
{
    Recorder r;
    CpuPins pins({0, 1}, r.apply());
    ASSERT_EQ(pins.pin(10), 0);
    EXPECT_EQ(pins.pin(10), 0); // not counted against itself
    EXPECT_EQ(pins.counted(0), 1u);
    EXPECT_EQ(pins.pin(11), 1);
}

TEST(CpuPins, ARefusalIsReportedAndNotCounted)
{
    Recorder r;
    CpuPins pins({0, 1}, r.apply());
    r.refuse_errno = EPERM;
    errno = 0;
    EXPECT_FALSE(pins.pin(10).has_value());
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(pins.counted(0), 0u);
    r.refuse_errno = 0;
    EXPECT_EQ(pins.pin(11), 0);
}

TEST(CpuPins, NoCpusPinsNothing)
{
    Recorder r;
    CpuPins pins({}, r.apply());
    EXPECT_FALSE(pins.pin(10).has_value());
    EXPECT_TRUE(r.applied.empty());
}

TEST(CpuPins, PoolsReserveNoMoreWorkersThanCpusTogether)
{
    Recorder r;
    CpuPins pins({0, 1, 2}, r.apply());
    unsigned others = 99;
    EXPECT_TRUE(pins.reserve(2, others)); // the HTTP pool
    EXPECT_EQ(others, 0u);
    EXPECT_FALSE(pins.reserve(2, others)); // a websockets pool of 2: 4 on 3 CPUs, refused, nothing kept
    EXPECT_EQ(others, 2u);
    EXPECT_TRUE(pins.reserve(1, others)); // one more still fits
    EXPECT_FALSE(pins.reserve(1, others));
    EXPECT_EQ(others, 3u);
    pins.unreserve(2); // the HTTP pool is gone
    EXPECT_TRUE(pins.reserve(2, others));
    EXPECT_EQ(others, 1u);
    pins.unreserve(100); // never below zero
    EXPECT_TRUE(pins.reserve(3, others));
    EXPECT_EQ(others, 0u);
}

TEST(CpuPins, UsableCpuListIsThisProcessAffinity)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
    const auto cpus = ferry::conf::usable_cpu_list();
    ASSERT_EQ(cpus.size(), static_cast<std::size_t>(CPU_COUNT(&set)));
    EXPECT_EQ(ferry::conf::usable_cpus(), cpus.size()); // num_workers: 0 and io_threads count the same CPUs
    for (std::size_t i = 0; i < cpus.size(); ++i) {
        EXPECT_TRUE(CPU_ISSET(cpus[i], &set));
        if (i > 0) {
            EXPECT_LT(cpus[i - 1], cpus[i]);
        }
    }
}

TEST(CpuPins, PinsARealProcessToOneCpu)
{
    const auto cpus = ferry::conf::usable_cpu_list();
    ASSERT_FALSE(cpus.empty());
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::pause();
        ::_exit(0);
    }
    CpuPins pins(cpus);
    const auto cpu = pins.pin(child);
    cpu_set_t set;
    CPU_ZERO(&set);
    const int got = ::sched_getaffinity(child, sizeof set, &set);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(cpu.has_value());
    EXPECT_EQ(*cpu, cpus.front());
    ASSERT_EQ(got, 0);
    EXPECT_EQ(CPU_COUNT(&set), 1);
    EXPECT_TRUE(CPU_ISSET(*cpu, &set));
    // Gone: the kernel says so (ESRCH), and it is not counted.
    errno = 0;
    EXPECT_FALSE(pins.pin(child).has_value());
    EXPECT_EQ(errno, ESRCH);
}

TEST(CpuPins, NewProcessesGetEveryCpuOnceTheLoopsArePinned)
{
    CpuPins pins({0, 1}, [](int, int) { return true; });
    EXPECT_EQ(pins.spawn_affinity(), nullptr); // before: a child inherits the launching thread's CPUs
    pins.loops_pinned();
    const cpu_set_t *all = pins.spawn_affinity();
    ASSERT_NE(all, nullptr);
    EXPECT_TRUE(CPU_ISSET(0, all));
    EXPECT_TRUE(CPU_ISSET(1, all));
    EXPECT_FALSE(CPU_ISSET(2, all));
    CpuPins other({0, 1}, [](int, int) { return true; }); // another host's table is not affected
    EXPECT_EQ(other.spawn_affinity(), nullptr);
}
