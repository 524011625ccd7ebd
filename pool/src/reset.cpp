// Rolling reset (docs/architecture.md, "Workers"): every worker is replaced by one that loads the code as it
// is now, max_recycling at a time per loop, the old ones serving until their replacements are ready. A new
// worker that cannot boot stops the reset and the old workers keep serving. Each loop's shard resets its own
// workers; Pool::Impl::reset joins them and reports.
#include "group.hpp"

#include "ferry/base/log.hpp"
#include "ferry/base/loops.hpp"

#include <algorithm>

namespace ferry::pool {

unsigned Shard::older_than(std::uint64_t gen, bool exiting) const
{
    unsigned n = 0;
    for (const auto &[pid, w] : workers)
        if (w->generation() < gen &&
            (exiting || (w->state() != State::stopping && w->state() != State::dead)))
            ++n;
    return n;
}

awaitable<Shard::ResetEnd> Shard::reset(std::uint64_t gen)
{
    generation = std::max(generation, gen);
    spawner.booted(); // a reset clears the boot back-off: the new code gets its try now
    boot_broken = false;
    reset_failure.clear();
    const unsigned kills_before = reset_kills;
    ResetReport report;
    for (auto &[pid, w] : workers)
        if (w->generation() < gen && (w->state() == State::ready || w->state() == State::working)) {
            if (w->recycle() == Recycle::replaced) // its max_jobs replacement is there, with code as old
                w->recycle_to(Recycle::on_release);
            w->mark(Cause::reset);
            ++report.replaced;
        }
    maintain();
    for (;;) {
        if (stopping.raised())
            co_return ResetEnd{ResetEnd::Kind::stopping, report, {}};
        if (!reset_failure.empty())
            co_return ResetEnd{ResetEnd::Kind::boot_failed, report, reset_failure};
        if (older_than(gen, true) == 0) // every old process is gone
            break;
        co_await changed.wait_until(clock::time_point::max());
    }
    report.killed = reset_kills - kills_before;
    co_return ResetEnd{ResetEnd::Kind::done, report, {}};
}

awaitable<Result<ResetReport>> Pool::Impl::reset(std::string why)
{
    const std::uint64_t gen = ++generation;
    const auto started = clock::now();
    log::info("pool", "rolling reset (" + why + "): replacing every worker, " +
                          std::to_string(std::max(1u, opt.max_recycling)) + " at a time per loop");
    if (tmpl)
        tmpl->renew(gen); // the next fork starts a template with the new code
    auto results = co_await on_each<Shard::ResetEnd>(
        loops(), [this, gen](std::size_t i) { return shards[i]->reset(gen); });
    ResetReport total;
    for (auto &r : results) {
        if (r.kind == Shard::ResetEnd::Kind::boot_failed) {
            log::error("pool",
                       "rolling reset (" + why +
                           ") stopped: a new worker could not boot (above); the old ones keep serving");
            co_return fail(r.error);
        }
        if (r.kind == Shard::ResetEnd::Kind::stopping) {
            log::error("pool", "rolling reset (" + why + ") stopped: the server is stopping");
            co_return fail("the server is stopping");
        }
        total.replaced += r.report.replaced;
        total.killed += r.report.killed;
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started).count();
    log::info("pool",
              "rolling reset (" + why + ") done in " + std::to_string(ms) +
                  " ms: " + std::to_string(total.replaced) + " worker(s) replaced" +
                  (total.killed ? ", " + std::to_string(total.killed) + " killed at reset_timeout" : ""));
    co_return total;
}

} // namespace ferry::pool
