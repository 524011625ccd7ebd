#include "supervisor.hpp"

#include "ferry/base/log.hpp"
#include "ferry/base/peer.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace ferry::pool {

namespace {
using std::chrono::milliseconds;

std::string describe_request(const relay::RequestContext &c)
{
    return c.method + " " + relay::printable(c.uri, 200);
}

std::string megabytes(std::uint64_t bytes)
{
    return std::to_string((bytes + (1u << 19)) >> 20) + " MB";
}

bool serving(const Worker &w)
{
    return (w.state() == State::ready || w.state() == State::working) && !w.is_template;
}
} // namespace

Supervisor::Supervisor(const Options &opt, const Registry &workers, const Flag &stopping, const bool &paused)
    : opt_(opt), workers_(workers), stopping_(stopping), paused_(paused)
{
    std::mt19937 rng(std::random_device{}());
    spread_ = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

void Supervisor::ready(Worker &w)
{
    Worker::Limits &l = w.limits_;
    l.idle_since = coarse_now_;
    // Workers that start together get thresholds spread evenly over the jitter range rather than at random
    // (random ones may all fall close): the golden-ratio sequence from a random start, one step per worker.
    spread_ = std::fmod(spread_ + 0.6180339887498949, 1.0);
    const double f = spread_;
    if (opt_.max_jobs != 0) {
        l.max_jobs = opt_.max_jobs + static_cast<std::uint64_t>(f * static_cast<double>(opt_.max_jobs / 4));
        l.rate_base_jobs = 0;
        l.rate_base_at = clock::now();
        l.rate_check_jobs = std::max<std::uint64_t>(1, l.max_jobs / 4);
    }
    if (opt_.ttl.count() > 0)
        l.ttl_end = w.started() + opt_.ttl -
                    milliseconds(static_cast<std::int64_t>(f * static_cast<double>(opt_.ttl.count() / 10)));
    if (opt_.max_worker_memory != 0) {
        l.memory_limit = opt_.max_worker_memory -
                         static_cast<std::uint64_t>(f * static_cast<double>(opt_.max_worker_memory / 10));
        l.memory_check_jobs = 1; // after its first request: how fast it grows is not known yet
    }
}

Supervisor::AfterJob Supervisor::job_done(Worker &w)
{
    Worker::Limits &l = w.limits_;
    w.exec().clear();
    ++l.jobs;
    l.idle_since = coarse_now_;
    if (opt_.debug) {
        w.blame(Cause::debug);
        return AfterJob::stop;
    }
    if (paused_)
        return AfterJob::keep;
    const bool over = l.memory_limit != 0 && l.jobs >= l.memory_check_jobs && over_memory(w);
    if (over && l.rss >= 2 * l.memory_limit) {
        // Far past its limit while its replacement boots or waits its turn (max_recycling): memory cannot
        // wait, it stops now and requests wait for another worker.
        w.blame_if_none(Cause::memory);
        log::warn("pool",
                  w.tag() + " uses " + megabytes(l.rss) + ", twice its max_worker_memory: stopping it now");
        return AfterJob::stop;
    }
    if (w.going()) {
        // Its replacement is ready (started early): it stops at its limit. Still booting: it serves on, up to
        // twice max_jobs.
        if (l.max_jobs != 0 && l.jobs >= (w.recycle() == Recycle::replaced ? l.max_jobs : 2 * l.max_jobs))
            return AfterJob::stop;
        return AfterJob::keep;
    }
    if (l.max_jobs != 0 && l.jobs >= l.max_jobs) {
        // "No throughput dip" over strictness: the replacement boots while this one keeps serving.
        w.mark(Cause::max_jobs);
        log::debug("pool", w.tag() + " reached max_jobs (" + std::to_string(l.jobs) + "), recycling");
        return AfterJob::retire;
    }
    if (l.max_jobs != 0 && l.jobs >= l.rate_check_jobs && starts_early(w)) {
        w.mark(Cause::max_jobs);
        return AfterJob::retire;
    }
    if (over && recycling() < std::max(1u, opt_.max_recycling)) {
        mark(w, Cause::memory,
             "uses " + megabytes(l.rss) + " (max_worker_memory " + megabytes(opt_.max_worker_memory) + ")");
        return AfterJob::retire;
    }
    return AfterJob::keep;
}

void Supervisor::booted(std::chrono::nanoseconds took)
{
    boot_estimate_ = std::max(took, (7 * boot_estimate_ + took) / 8);
}

bool Supervisor::starts_early(Worker &w)
{
    Worker::Limits &l = w.limits_;
    const auto now = clock::now();
    const double secs = std::chrono::duration<double>(now - l.rate_base_at).count();
    const double rate = secs > 0 ? static_cast<double>(l.jobs - l.rate_base_jobs) / secs : 0.0;
    const double margin = 2.0 * rate * std::chrono::duration<double>(boot_estimate_).count();
    const std::uint64_t left = l.max_jobs - l.jobs; // job_done() checked the limit first: left > 0
    if (margin >= static_cast<double>(left)) {
        log::debug("pool",
                   w.tag() + " at " + std::to_string(l.jobs) + " of its max_jobs " +
                       std::to_string(l.max_jobs) + " (" + std::to_string(std::lround(rate)) +
                       " req/s, boots take ~" +
                       std::to_string(std::chrono::duration_cast<milliseconds>(boot_estimate_).count()) +
                       " ms): its replacement starts now");
        return true;
    }
    l.rate_base_jobs = l.jobs;
    l.rate_base_at = now;
    l.rate_check_jobs = l.jobs + std::max<std::uint64_t>(1, (left - static_cast<std::uint64_t>(margin)) / 2);
    return false;
}

bool Supervisor::over_memory(Worker &w)
{
    Worker::Limits &l = w.limits_;
    const std::uint64_t rss = read_rss(w.pid());
    if (rss == 0)
        return false; // gone, or /proc unreadable: the reaper or the next tick knows
    l.rss = rss;
    // The next reading after requests: halfway to the limit at the growth per request seen since the last
    // reading that had requests between (a tick may read a worker that served none since: that tells
    // nothing of its growth, the plan stands); none (the tick only) while it does not grow; every request
    // once it is over the limit, until it is gone.
    if (l.jobs > l.rss_jobs) {
        const std::uint64_t jobs = l.jobs - l.rss_jobs;
        const std::uint64_t grown = rss > l.rss_base ? rss - l.rss_base : 0;
        l.rss_base = rss;
        l.rss_jobs = l.jobs;
        if (grown == 0) {
            l.memory_check_jobs = ~0ull;
        } else {
            const std::uint64_t per_job = std::max<std::uint64_t>(1, grown / jobs);
            const std::uint64_t room = rss < l.memory_limit ? l.memory_limit - rss : 0;
            l.memory_check_jobs = l.jobs + std::max<std::uint64_t>(1, room / per_job / 2);
        }
    }
    if (rss <= l.memory_limit)
        return false;
    l.memory_check_jobs = l.jobs + 1;
    return true;
}

unsigned Supervisor::recycling() const
{
    unsigned n = 0;
    for (const auto &[pid, w] : workers_)
        if (w->going() && serving(*w))
            ++n;
    return n;
}

void Supervisor::mark(Worker &w, Cause c, const std::string &why)
{
    w.mark(c);
    log::info("pool", w.tag() + " " + why + ": replacing it (" + cause_name(c) + ")");
}

void Supervisor::watch(clock::time_point now)
{
    const bool limits = opt_.ttl.count() > 0 || opt_.idle_ttl.count() > 0 || opt_.max_worker_memory != 0;
    if (!limits || paused_ || opt_.debug)
        return;
    struct Due {
        Worker *w;
        Cause cause;
        std::string why;
    };
    std::vector<Due> due;
    for (auto &[pid, wp] : workers_) {
        Worker &w = *wp;
        const Worker::Limits &l = w.limits_;
        if (!serving(w) || w.going())
            continue;
        if (now >= l.ttl_end) {
            due.push_back({&w, Cause::ttl, "lived its ttl (" + std::to_string(opt_.ttl.count()) + " ms)"});
        } else if (opt_.idle_ttl.count() > 0 && w.state() == State::ready && l.jobs > 0 &&
                   now - l.idle_since >= opt_.idle_ttl) {
            due.push_back({&w, Cause::idle_ttl,
                           "was idle for its idle_ttl (" + std::to_string(opt_.idle_ttl.count()) + " ms)"});
        } else if (l.memory_limit != 0 && over_memory(w)) {
            due.push_back({&w, Cause::memory,
                           "uses " + megabytes(l.rss) + " (max_worker_memory " +
                               megabytes(opt_.max_worker_memory) + ")"});
        }
    }
    if (due.empty())
        return;
    // Memory first (it grows while it waits), then the oldest.
    std::sort(due.begin(), due.end(), [](const Due &a, const Due &b) {
        if ((a.cause == Cause::memory) != (b.cause == Cause::memory))
            return a.cause == Cause::memory;
        return a.w->started() < b.w->started();
    });
    const unsigned busy = recycling(), bound = std::max(1u, opt_.max_recycling);
    unsigned marked = 0;
    for (auto &d : due) {
        if (busy + marked >= bound)
            break; // the others on a later tick, once these are replaced
        mark(*d.w, d.cause, d.why);
        ++marked;
    }
    if (marked > 0 && on_marked)
        on_marked();
}

awaitable<void> Supervisor::run(std::shared_ptr<Supervisor> self)
{
    auto period = std::min(milliseconds(1000), self->opt_.watch_tick);
    for (auto limit :
         {self->opt_.exec_ttl, self->opt_.exec_warn, self->opt_.reset_timeout, self->opt_.client_gone_ttl})
        if (limit.count() > 0)
            period = std::min(period, std::max(milliseconds(10), limit / 8));
    period = std::max(period, milliseconds(1));
    while (!co_await self->stopping_.wait_until(clock::now() + period))
        self->tick(period);
}

void Supervisor::tick(std::chrono::milliseconds period)
{
    auto now = clock::now();
    coarse_now_ = now;
    if (now >= next_watch_) {
        next_watch_ = now + opt_.watch_tick;
        watch(now);
    }
    std::vector<WorkerPtr> expired, reset_expired, abandoned;
    for (auto &[pid, w] : workers_) {
        Worker::Exec &exec = w->exec();
        if (w->state() != State::working || !exec.ctx())
            continue;
        if (w->recycle() == Recycle::on_release && now >= w->reset_deadline() && !w->killed_by_reset()) {
            reset_expired.push_back(w);
            continue;
        }
        // exec.started is the tick before the request began: one period less is a lower bound of how long it
        // has run, so no request is cut early (late by at most two periods, a quarter of the limit).
        auto ran = std::chrono::duration_cast<milliseconds>(now - exec.started()) - period;
        // Its client left: the work goes to nobody. It may finish within client_gone_ttl (PHP code that must
        // end what it began); past that, the worker is replaced rather than kept from every other client. A
        // stream that goes on is stopped sooner (its next write fails, STOP); one that sends nothing more is
        // ended here, or it would hold its worker for good.
        if (opt_.client_gone_ttl.count() > 0 && exec.client() >= 0 && peer_left(exec.client())) {
            if (exec.client_left_at() == clock::time_point{})
                exec.client_left(now);
            else if (now - exec.client_left_at() >= opt_.client_gone_ttl) {
                abandoned.push_back(w);
                continue;
            }
        }
        if (opt_.exec_ttl.count() > 0 && ran >= opt_.exec_ttl && !exec.streaming()) {
            expired.push_back(w);
        } else if (opt_.exec_warn.count() > 0 && ran >= opt_.exec_warn && !exec.warned()) {
            exec.warned_slow();
            log::warn("pool", w->tag() + " has been running " + describe_request(*exec.ctx()) + " for " +
                                  std::to_string(ran.count()) + " ms (over exec_warn)");
        }
    }
    // The exchange fails now (its client gets the answer for `cause`); the pool kills the worker after.
    auto fail = [](const WorkerPtr &w, Cause cause, const std::string &why) {
        w->blame(cause);
        w->exec().clear();
        w->channel().expire(why);
    };
    for (auto &w : reset_expired) {
        std::string why = "still busy " + std::to_string(opt_.reset_timeout.count()) +
                          " ms after a rolling reset asked it to stop (reset_timeout): " +
                          describe_request(*w->exec().ctx());
        log::error("pool", w->tag() + " " + why + "; answering 503 and killing the worker");
        w->reset_timed_out();
        fail(w, Cause::reset, why);
    }
    for (auto &w : abandoned) {
        std::string why =
            "its client left " +
            std::to_string(
                std::chrono::duration_cast<milliseconds>(now - w->exec().client_left_at()).count()) +
            " ms ago and the request still runs (client_gone_ttl " +
            std::to_string(opt_.client_gone_ttl.count()) + " ms): " + describe_request(*w->exec().ctx());
        log::warn("pool", w->tag() + ": " + why + "; killing and replacing the worker");
        fail(w, Cause::client_gone, why);
    }
    for (auto &w : expired) {
        std::string why = "request ran longer than exec_ttl (" + std::to_string(opt_.exec_ttl.count()) +
                          " ms): " + describe_request(*w->exec().ctx());
        log::error("pool", w->tag() + ": " + why + "; answering 504 and killing the worker");
        fail(w, Cause::exec_ttl, why);
    }
}

} // namespace ferry::pool
