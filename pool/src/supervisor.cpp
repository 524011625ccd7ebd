#include "supervisor.hpp"

#include "ferry/relay/log.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace ferry::pool {

namespace {
std::string describe_request(const relay::RequestContext &c)
{
    return c.method + " " + relay::printable(c.uri, 200);
}
} // namespace

Supervisor::Supervisor(const Options &opt, const Registry &workers, const Flag &stopping)
    : opt_(opt), workers_(workers), stopping_(stopping), rng_(std::random_device{}())
{
}

std::uint64_t Supervisor::jittered_max_jobs()
{
    if (opt_.max_jobs == 0)
        return 0;
    std::uniform_int_distribution<std::uint64_t> d(0, opt_.max_jobs / 4);
    return opt_.max_jobs + d(rng_);
}

Supervisor::AfterJob Supervisor::job_done(Worker &w, bool paused)
{
    w.exec_ctx = nullptr;
    ++w.jobs;
    if (paused)
        return AfterJob::keep;
    if (w.max_jobs != 0 && w.jobs >= w.max_jobs && !w.retire) {
        // "No throughput dip" over strictness: the replacement boots while this one keeps serving.
        w.retire = true;
        log::debug("pool", w.tag() + " reached max_jobs (" + std::to_string(w.jobs) + "), recycling");
        return AfterJob::retire;
    }
    if (w.retire && w.jobs >= 2 * w.max_jobs)
        return AfterJob::stop; // no more overflow
    return AfterJob::keep;
}

awaitable<void> Supervisor::run(std::shared_ptr<Supervisor> self)
{
    using std::chrono::milliseconds;
    auto period = milliseconds(1000);
    for (auto limit : {self->opt_.exec_ttl, self->opt_.exec_warn, self->opt_.reset_timeout})
        if (limit.count() > 0)
            period = std::min(period, std::max(milliseconds(10), limit / 8));
    while (!co_await self->stopping_.wait_until(clock::now() + period))
        self->tick(period);
}

void Supervisor::tick(std::chrono::milliseconds period)
{
    using std::chrono::milliseconds;
    auto now = clock::now();
    coarse_now_ = now;
    std::vector<WorkerPtr> expired, reset_expired;
    for (auto &[pid, w] : workers_) {
        if (w->state != State::working || !w->exec_ctx)
            continue;
        if (w->stop_on_release && now >= w->reset_deadline && !w->reset_killed) {
            reset_expired.push_back(w);
            continue;
        }
        // exec_started is the tick before the request began: one period less is a lower bound of how long it
        // has run, so no request is cut early (late by at most two periods, a quarter of the limit).
        auto ran = std::chrono::duration_cast<milliseconds>(now - w->exec_started) - period;
        if (opt_.exec_ttl.count() > 0 && ran >= opt_.exec_ttl) {
            expired.push_back(w);
        } else if (opt_.exec_warn.count() > 0 && ran >= opt_.exec_warn && !w->exec_warned) {
            w->exec_warned = true;
            log::warn("pool", w->tag() + " has been running " + describe_request(*w->exec_ctx) + " for " +
                                  std::to_string(ran.count()) + " ms (over exec_warn)");
        }
    }
    for (auto &w : reset_expired) {
        std::string why =
            "still busy " + std::to_string(opt_.reset_timeout.count()) +
            " ms after a rolling reset asked it to stop (reset_timeout): " + describe_request(*w->exec_ctx);
        log::error("pool", w->tag() + " " + why + "; answering 503 and killing the worker");
        w->reset_killed = true;
        w->exec_ctx = nullptr;
        w->channel->expire(why);
    }
    for (auto &w : expired) {
        std::string why = "request ran longer than exec_ttl (" + std::to_string(opt_.exec_ttl.count()) +
                          " ms): " + describe_request(*w->exec_ctx);
        log::error("pool", w->tag() + ": " + why + "; answering 504 and killing the worker");
        w->exec_ctx = nullptr;
        w->channel->expire(why);
    }
}

} // namespace ferry::pool
