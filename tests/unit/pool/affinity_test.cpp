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
