// The server-wide counters (control/counters.hpp) are objects, not process state: two servers' counters (two
// ServerCounters) never mix, and /metrics shows what the object it is given counted — descriptor refusals by
// where, limits' refusals, the budgets it was told about.
#include "control/counters.hpp"
#include "control/metrics.hpp"
#include "ferry/base/budget.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

using namespace ferry::server::detail;

namespace {

bool has_line(const std::string &text, const std::string &line)
{
    return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

} // namespace

TEST(ServerCounters, TwoServersCountApart)
{
    ServerCounters a, b;
    a.descriptors.exhausted(FdUser::accept, EMFILE);
    a.descriptors.exhausted(FdUser::accept, EMFILE);
    a.descriptors.exhausted(FdUser::static_files, ENFILE);
    b.limits.count(LimitEvent::slow_body);
    a.control.count(ControlListener::rpc, CloseReason::limit);

    EXPECT_EQ(a.descriptors.count(FdUser::accept), 2u);
    EXPECT_EQ(a.descriptors.count(FdUser::static_files), 1u);
    EXPECT_EQ(b.descriptors.count(FdUser::accept), 0u);
    EXPECT_EQ(a.control.snapshot()
                  .n[static_cast<unsigned>(ControlListener::rpc)][static_cast<unsigned>(CloseReason::limit)],
              1u);
    EXPECT_EQ(b.control.snapshot()
                  .n[static_cast<unsigned>(ControlListener::rpc)][static_cast<unsigned>(CloseReason::limit)],
              0u);

    std::string ma, mb;
    format_descriptor_metrics(ma, a.descriptors);
    format_descriptor_metrics(mb, b.descriptors);
    EXPECT_TRUE(has_line(ma, "ferry_descriptor_exhaustion_total{where=\"accept\"} 2")) << ma;
    EXPECT_TRUE(has_line(ma, "ferry_descriptor_exhaustion_total{where=\"static\"} 1")) << ma;
    EXPECT_TRUE(has_line(mb, "ferry_descriptor_exhaustion_total{where=\"accept\"} 0")) << mb;

    std::string la, lb;
    a.limits.format(la);
    b.limits.format(lb);
    EXPECT_TRUE(has_line(lb, "ferry_limit_refusals_total{limit=\"slow_body\"} 1")) << lb;
    EXPECT_TRUE(has_line(la, "ferry_limit_refusals_total{limit=\"slow_body\"} 0")) << la;
}

TEST(ServerCounters, TheBudgetsShownAreTheOnesTheServerOwns)
{
    ServerCounters c;
    std::string none;
    c.limits.format(none);
    EXPECT_TRUE(has_line(none, "ferry_body_memory_limit_bytes 0")) << "no budget told: zeros\n" << none;

    ferry::Budget body(4096);
    ASSERT_TRUE(body.try_take(1000));
    c.limits.body_budget = &body;
    std::string shown;
    c.limits.format(shown);
    EXPECT_TRUE(has_line(shown, "ferry_body_memory_limit_bytes 4096")) << shown;
    EXPECT_TRUE(has_line(shown, "ferry_body_memory_bytes 1000")) << shown;
    body.give(1000);
}
