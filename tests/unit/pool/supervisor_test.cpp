// The supervisor's decisions on their own: jittered thresholds spread over their range, what happens after a
// request (max_jobs, debug, memory), and RSS reading.
#include "supervisor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <unistd.h>
#include <vector>

using namespace ferry::pool;
using namespace std::chrono_literals;

namespace ferry::pool {
// A worker's soft-limit bookkeeping, which only Supervisor writes (worker.hpp): read here, and a limit
// lowered mid-life.
struct SupervisorTestHook {
    static auto &limits(Worker &w) { return w.limits_; }
};
} // namespace ferry::pool

namespace {
const auto &limits(Worker &w)
{
    return SupervisorTestHook::limits(w);
}

struct Fixture {
    explicit Fixture(Options o) : opt(std::move(o)), stopping(io), sup(opt, workers, stopping, paused) {}
    WorkerPtr add(int pid)
    {
        auto w = std::make_shared<Worker>(io, 1u << 20);
        w->launched(pid, 0);
        w->to(State::ready);
        workers.emplace(pid, w);
        return w;
    }
    ferry::asio::io_context io;
    Options opt;
    Registry workers;
    Flag stopping;
    bool paused = false;
    Supervisor sup;
};

// After its current job count, `w` serves on (keep) through job `last - 1` and is stopped after job `last`.
void keeps_then_stops_at(Fixture &f, Worker &w, std::uint64_t last)
{
    for (std::uint64_t i = w.jobs() + 1; i < last; ++i)
        ASSERT_EQ(f.sup.job_done(w), Supervisor::AfterJob::keep) << i;
    EXPECT_EQ(f.sup.job_done(w), Supervisor::AfterJob::stop);
    EXPECT_EQ(w.jobs(), last);
}

} // namespace

TEST(Supervisor, ThresholdsOfWorkersStartedTogetherAreSpreadOverTheJitterRange)
{
    Options o;
    o.max_jobs = 1000;
    o.ttl = 60s;
    o.max_worker_memory = 100u << 20;
    Fixture f(o);
    std::vector<std::uint64_t> jobs;
    for (int i = 0; i < 8; ++i) {
        auto w = f.add(100 + i);
        f.sup.ready(*w);
        EXPECT_GE(w->max_jobs(), 1000u);
        EXPECT_LE(w->max_jobs(), 1250u); // up to 25 % more
        EXPECT_LE(limits(*w).ttl_end, w->started() + 60s);
        EXPECT_GE(limits(*w).ttl_end, w->started() + 54s); // up to 10 % shorter, never longer
        EXPECT_LE(limits(*w).memory_limit, 100u << 20);
        EXPECT_GE(limits(*w).memory_limit, 90u << 20);
        jobs.push_back(w->max_jobs());
    }
    // Evenly: sorted, no two of the 8 closer than a twentieth of the range (random draws often are).
    std::sort(jobs.begin(), jobs.end());
    for (std::size_t i = 1; i < jobs.size(); ++i)
        EXPECT_GE(jobs[i] - jobs[i - 1], 250u / 20) << i;
    EXPECT_GE(jobs.back() - jobs.front(), 250u / 2);
}

TEST(Supervisor, MaxJobsRetiresThenStopsAtTwiceTheLimit)
{
    Options o;
    o.max_jobs = 4;
    Fixture f(o);
    auto w = f.add(1);
    f.sup.ready(*w);
    ASSERT_EQ(w->max_jobs(), 4u); // 4 + a fraction of 4 / 4, rounded down
    const std::uint64_t limit = w->max_jobs();
    for (std::uint64_t i = 1; i < limit; ++i)
        EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep);
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::retire);
    EXPECT_EQ(w->cause(), Cause::max_jobs);
    // It serves on while its replacement boots, up to twice its limit.
    keeps_then_stops_at(f, *w, 2 * limit);
}

TEST(Supervisor, MaxJobsReplacementStartsEarlyWhenABootOutlastsTheJobsLeft)
{
    // Boots take 10 s here: at any real request rate the jobs left after a quarter of max_jobs are done long
    // before a replacement could boot, so it starts at the first check.
    Options o;
    o.max_jobs = 1000;
    Fixture f(o);
    f.sup.booted(10s);
    EXPECT_EQ(f.sup.boot_estimate(), 10s);
    auto w = f.add(1);
    f.sup.ready(*w);
    const std::uint64_t first_check = w->max_jobs() / 4;
    for (std::uint64_t i = 1; i < first_check; ++i)
        ASSERT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep) << i;
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::retire);
    EXPECT_EQ(w->cause(), Cause::max_jobs);
    EXPECT_EQ(w->jobs(), first_check);
    // Its replacement still booting, it serves on past its limit, up to twice max_jobs.
    keeps_then_stops_at(f, *w, 2 * w->max_jobs());
}

TEST(Supervisor, AReplacedWorkerStopsAtItsMaxJobs)
{
    Options o;
    o.max_jobs = 1000;
    Fixture f(o);
    f.sup.booted(10s);
    auto w = f.add(1);
    f.sup.ready(*w);
    while (f.sup.job_done(*w) != Supervisor::AfterJob::retire)
        ASSERT_LT(w->jobs(), w->max_jobs());
    w->recycle_to(Recycle::replaced); // the pool: its replacement is ready
    keeps_then_stops_at(f, *w, w->max_jobs());
}

TEST(Supervisor, BootsFasterThanTheJobsLeftStartTheReplacementAtTheLimit)
{
    // A 1 ns boot: the rate checks find no reason to start early, and the worker retires at max_jobs.
    Options o;
    o.max_jobs = 1000;
    Fixture f(o);
    f.sup.booted(1ns);
    auto w = f.add(1);
    f.sup.ready(*w);
    for (std::uint64_t i = 1; i < w->max_jobs(); ++i)
        ASSERT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep) << i;
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::retire);
}

TEST(Supervisor, TheBootEstimateFollowsSlowerBootsAtOnceAndFasterOnesSlowly)
{
    Options o;
    Fixture f(o);
    f.sup.booted(80ms);
    EXPECT_EQ(f.sup.boot_estimate(), 80ms);
    f.sup.booted(160ms);
    EXPECT_EQ(f.sup.boot_estimate(), 160ms);
    f.sup.booted(0ms);
    EXPECT_EQ(f.sup.boot_estimate(), 140ms); // an eighth of the way down
}

TEST(Supervisor, WhileBootsFailNothingIsRetired)
{
    Options o;
    o.max_jobs = 1;
    Fixture f(o);
    auto w = f.add(1);
    f.sup.ready(*w);
    f.paused = true;
    for (int i = 0; i < 5; ++i)
        EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep);
    EXPECT_FALSE(w->going());
}

TEST(Supervisor, DebugStopsEveryWorkerAfterOneRequest)
{
    Options o;
    o.debug = true;
    Fixture f(o);
    auto w = f.add(1);
    f.sup.ready(*w);
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::stop);
    EXPECT_EQ(w->cause(), Cause::debug);
}

TEST(Supervisor, MemoryOverTheLimitRetiresAndTwiceTheLimitStops)
{
    // This test process as the "worker": its RSS is real and well over 1 MB.
    const std::uint64_t rss = read_rss(::getpid());
    ASSERT_GT(rss, 1u << 20);
    Options o;
    o.max_worker_memory = rss / 4; // over it, and over twice it
    o.max_recycling = 1;
    Fixture f(o);
    auto w = f.add(::getpid());
    f.sup.ready(*w);
    ASSERT_EQ(limits(*w).memory_check_jobs, 1u) << "read after the first request";
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::stop);
    EXPECT_EQ(w->cause(), Cause::memory);
    EXPECT_GE(limits(*w).rss, rss / 2);

    Options o2;
    o2.max_worker_memory = rss * 2 / 3; // over it, not twice
    Fixture g(o2);
    auto v = g.add(::getpid());
    g.sup.ready(*v);
    EXPECT_EQ(g.sup.job_done(*v), Supervisor::AfterJob::retire);
    EXPECT_EQ(v->cause(), Cause::memory);
    EXPECT_TRUE(v->going());
}

TEST(Supervisor, AWorkerThatDoesNotGrowIsReadOnTheTickOnly)
{
    const std::uint64_t rss = read_rss(::getpid());
    Options o;
    o.max_worker_memory = rss * 8;
    Fixture f(o);
    auto w = f.add(::getpid());
    f.sup.ready(*w);
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep);
    EXPECT_GT(limits(*w).rss, 0u);
    // One reading: growth unknown (from 0 it "grew"), the next reading planned by the room left.
    EXPECT_GT(limits(*w).memory_check_jobs, 1u);
    while (w->jobs() + 1 < limits(*w).memory_check_jobs) // the jobs before the planned reading
        ASSERT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep);
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep);
    // The second reading saw (almost) no growth over many jobs: the next one is far away or never.
    EXPECT_GT(limits(*w).memory_check_jobs, w->jobs() + 1000);
}

TEST(Supervisor, AReadingWithNoRequestSinceKeepsThePlanAndOverTheLimitReadsEveryRequest)
{
    // The soak found it: a tick reading a worker that had served nothing since the last reading saw "no
    // growth" and cancelled the readings after requests, so a leaking worker grew to 4x its limit.
    const std::uint64_t rss = read_rss(::getpid());
    Options o;
    o.max_worker_memory = rss * 4;
    Fixture f(o);
    auto w = f.add(::getpid());
    f.sup.ready(*w);
    EXPECT_EQ(f.sup.job_done(*w), Supervisor::AfterJob::keep); // first reading: grew from 0, plan set
    const std::uint64_t planned = limits(*w).memory_check_jobs;
    ASSERT_GT(planned, w->jobs());
    ASSERT_NE(planned, ~0ull);
    EXPECT_FALSE(f.sup.over_memory(*w)); // the tick, no request since
    EXPECT_EQ(limits(*w).memory_check_jobs, planned);
    SupervisorTestHook::limits(*w).memory_limit = rss / 2; // now over it
    EXPECT_TRUE(f.sup.over_memory(*w));
    EXPECT_EQ(limits(*w).memory_check_jobs, w->jobs() + 1);
    EXPECT_TRUE(f.sup.over_memory(*w)); // again with no request: still every request
    EXPECT_EQ(limits(*w).memory_check_jobs, w->jobs() + 1);
}

TEST(Supervisor, ReadRss)
{
    EXPECT_GT(read_rss(::getpid()), 0u);
    EXPECT_EQ(read_rss(0x7ffffff0), 0u); // no such process
    EXPECT_STREQ(cause_name(Cause::idle_ttl), "idle_ttl");
    EXPECT_STREQ(cause_name(Cause::shutdown), "shutdown");
}
