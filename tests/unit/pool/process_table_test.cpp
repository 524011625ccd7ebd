// detail::ProcessTable (the Host's table of child processes): exits routed to their owner, a pid reaped
// before it was claimed, owners that go away, and the bound on exits nobody claims.
#include "process_table.hpp"

#include "ferry/pool/host.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include <chrono>
#include <vector>

using namespace ferry;
using ferry::pool::detail::ExitListener;
using ferry::pool::detail::ProcessTable;

namespace {

struct Owner final : ExitListener {
    struct Exit {
        int pid, status;
        unsigned part;
    };
    std::vector<Exit> seen;
    void exited(int pid, int status, unsigned part) override { seen.push_back({pid, status, part}); }
};

} // namespace

namespace {

// The pids `owner` recorded (with `part`: those alone), sorted.
std::vector<int> pids_of(ProcessTable &t, const ExitListener &owner,
                         std::optional<unsigned> part = std::nullopt)
{
    std::vector<int> out;
    auto add = [&out](int pid) { out.push_back(pid); };
    if (part)
        t.for_each(owner, *part, add);
    else
        t.for_each(owner, add);
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

TEST(ProcessTable, AnExitGoesToTheOwnerOfThePidWithItsPart)
{
    ProcessTable t;
    Owner http, ws;
    ASSERT_TRUE(t.start(http, 1, [] { return Result<int>(101); }));
    EXPECT_FALSE(t.claim(202, ws, 0).has_value());
    t.reaped(202, 9);
    t.reaped(101, 0);
    ASSERT_EQ(http.seen.size(), 1u);
    EXPECT_EQ(http.seen[0].pid, 101);
    EXPECT_EQ(http.seen[0].part, 1u);
    ASSERT_EQ(ws.seen.size(), 1u);
    EXPECT_EQ(ws.seen[0].status, 9);
    t.reaped(101, 0); // reaped once: a second report of the pid is nobody's
    EXPECT_EQ(http.seen.size(), 1u);
}

TEST(ProcessTable, APidReapedBeforeItWasClaimedGivesItsStatusToTheClaim)
{
    ProcessTable t;
    Owner o;
    t.reaped(303, 256);
    auto status = t.claim(303, o, 0);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(*status, 256);
    EXPECT_TRUE(o.seen.empty());
    EXPECT_FALSE(t.claim(303, o, 0).has_value()); // taken: a new claim records it
}

TEST(ProcessTable, AFailedStartRecordsNothing)
{
    ProcessTable t;
    Owner o;
    EXPECT_FALSE(t.start(o, 0, [] { return Result<int>(fail("cannot start")); }));
    int n = 0;
    t.for_each(o, [&n](int) { ++n; });
    EXPECT_EQ(n, 0);
}

TEST(ProcessTable, AnOwnerGoingAwayForgetsOnlyItsPids)
{
    ProcessTable t;
    Owner a, b;
    t.claim(1, a, 0);
    t.claim(2, a, 0);
    t.claim(3, b, 0);
    t.forget_all(a);
    EXPECT_EQ(pids_of(t, b), std::vector<int>{3});
    t.reaped(1, 0);
    EXPECT_TRUE(a.seen.empty());
    t.forget(3);
    t.reaped(3, 0);
    EXPECT_TRUE(b.seen.empty());
}

TEST(ProcessTable, APartsPidsAloneForTheShardThatStopsThem)
{
    // A second signal: each shard, on its own loop, kills its own processes once it has stopped.
    ProcessTable t;
    Owner a, b;
    for (int pid : {1, 2, 3})
        t.claim(pid, a, pid == 1 ? 0 : 1);
    t.claim(4, b, 1);
    EXPECT_EQ(pids_of(t, a, 1), (std::vector<int>{2, 3}));
    EXPECT_TRUE(pids_of(t, a, 7).empty());
    EXPECT_EQ(pids_of(t, a), (std::vector<int>{1, 2, 3}));
}

TEST(ProcessTable, ExitsNobodyClaimsAreBounded)
{
    ProcessTable t;
    Owner o;
    for (int pid = 1000; pid < 1100; ++pid) // re-parented orphans, never claimed (100 > max_unclaimed)
        t.reaped(pid, 0);
    EXPECT_FALSE(t.claim(1000, o, 0).has_value()); // the oldest were dropped: at most 64 are kept
    EXPECT_TRUE(t.claim(1099, o, 0).has_value());
}

TEST(ProcessTable, ExitsNobodyClaimsAreKeptTenSecondsAtMost)
{
    ProcessTable t;
    Owner o;
    const auto t0 = std::chrono::steady_clock::now();
    t.reaped(500, 0, t0);
    t.reaped(501, 9, t0 + std::chrono::seconds(5));
    t.reaped(502, 0, t0 + ProcessTable::unclaimed_for + std::chrono::seconds(1)); // 500 has aged out
    EXPECT_FALSE(t.claim(500, o, 0).has_value());
    auto kept = t.claim(501, o, 0);
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(*kept, 9);
}

TEST(Host, EachHostHasItsOwnTables)
{
    pool::Host one({0, 1}, "/tmp"), two({0}, "/tmp");
    EXPECT_NE(&one.processes(), &two.processes());
    EXPECT_EQ(one.tmp_dir(), "/tmp");
}
