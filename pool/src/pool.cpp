// The pool: one Shard per event loop (shard.hpp), joined by Pool::Impl (group.hpp). The roles, one file each:
//   worker      one process: pid, state, signals, jobs, how it is stopped
//   spawner     command, back-off after boot failures, launching, the PID handshake
//   reaper      SIGCHLD reaping and stderr forwarding; process_table: whose each child is (the Host's)
//   allocator   idle set and the FIFO of waiting requests
//   exchange    one request on one worker (docs/protocol.md §2-§4)
//   supervisor  max_jobs recycling, exec_ttl, exec_warn
//   shard, dispatch, lending, boot, reset, placement, exits: a shard's and the pool's parts (shard.hpp)
// Here: construction, start, shutdown and its summary, the workers' snapshot, the facade and its stats.
#include "group.hpp"

#include "affinity.hpp"
#include "ferry/base/log.hpp"
#include "ferry/base/loops.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/prctl.h>

namespace ferry::pool {

Pool::Impl::Impl(std::shared_ptr<Host> h, const std::vector<asio::io_context *> &loops, Options o)
    : opt(std::move(o)), host(std::move(h)),
      reaper(std::make_shared<Reaper>(*loops.at(0), [h = host](int pid, int status) {
          h->processes().reaped(pid, status); // every pool's reaper runs on loops[0]
      }))
{
    const auto n = static_cast<unsigned>(loops.size());
    for (unsigned i = 0; i < n; ++i) {
        Options share = opt;
        share.num_workers = opt.num_workers / n + (i < opt.num_workers % n ? 1 : 0);
        shards.push_back(std::make_shared<Shard>(*this, i, *loops[i], std::move(share)));
        shards.back()->allocator.on_queued = [s = shards.back().get()] { s->queued(); };
        if (n > 1)
            shards.back()->allocator.publish_to(&shards.back()->published);
    }
    if (opt.fork != Fork::off) {
        Shard &first = *shards[0];
        tmpl = std::make_shared<ForkTemplate>(first.io, first.opt, first.spawner, first.stopping,
                                              [this](int pid, bool alive) -> std::optional<int> {
                                                  if (alive)
                                                      return claim(pid, template_owner);
                                                  host->processes().forget(pid);
                                                  return std::nullopt;
                                              });
    }
}

Pool::Impl::~Impl()
{
    host->processes().forget_all(*this);
}

std::vector<asio::any_io_executor> Pool::Impl::loops() const
{
    std::vector<asio::any_io_executor> out;
    for (auto &s : shards)
        out.push_back(s->io.get_executor());
    return out;
}

awaitable<Result<void>> Pool::Impl::start()
{
    for (auto &s : shards)
        if (auto prepared = s->spawner.prepare(); !prepared)
            co_return prepared;
    resolve_cpu_affinity();
    if (auto prio = resolve_recycle_priority(); !prio)
        co_return prio;
    asio::co_spawn(shards[0]->io, Reaper::run(reaper), log_exceptions{"reaper"});
    // Forked workers are grandchildren of ours (docs/protocol.md §8): as a child subreaper we become
    // their parent when the template's middle process exits, and reap them like the others.
    if (tmpl && ::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        co_return fail(opt.mode + ".pool.fork: cannot become a child subreaper: " + std::strerror(errno));
    auto results =
        co_await on_each<Result<void>>(loops(), [this](std::size_t i) { return shards[i]->start(); });
    for (auto &r : results)
        if (!r)
            co_return r;
    co_await pin_loops();
    co_return Result<void>{};
}

awaitable<void> Pool::Impl::shutdown(clock::time_point deadline)
{
    co_await on_each<Result<void>>(loops(),
                                   [this, deadline](std::size_t i) { return shards[i]->shutdown(deadline); });
    if (tmpl)
        co_await tmpl->stop(deadline);
    reaper->stop();
    std::uint64_t dropped = 0, requests = 0, waited = 0, longest = 0, lent = 0, rejected = 0;
    for (auto &s : shards) {
        rejected += s->rejected_total.load();
        dropped += s->allocator.dropped();
        requests += s->requests_total.load();
        waited += s->waited_total.load();
        longest = std::max(longest, s->longest_wait_us.load());
        lent += s->lent_total.load();
    }
    // What a user tuning num_workers and io_threads wants to know: how often a request had to queue.
    log::info("pool", std::to_string(requests) + " request(s) served; " + std::to_string(waited) +
                          " waited for a worker (longest " + std::to_string(longest / 1000) + " ms); " +
                          std::to_string(lent) + " worker(s) lent between loops");
    if (dropped > 0)
        log::info("pool", std::to_string(dropped) +
                              " queued request(s) were not executed: their client left while they waited");
    if (rejected > 0)
        log::info("pool", std::to_string(rejected) + " request(s) answered 503 at once: the queue was full "
                                                     "(max_queue_size)");
}

awaitable<std::vector<WorkerInfo>> Pool::Impl::snapshot(bool memory)
{
    auto parts = co_await on_each<std::vector<WorkerInfo>>(loops(), [this, memory](std::size_t i) {
        return [](Shard *s, bool with_rss) -> awaitable<std::vector<WorkerInfo>> {
            std::vector<WorkerInfo> out;
            for (const auto &[pid, w] : s->workers)
                out.push_back(WorkerInfo{pid, state_name(w->state()), w->jobs(), w->created, s->index,
                                         w->going(), w->cause(), with_rss ? read_rss(pid) : 0, w->cpu()});
            co_return out;
        }(shards[i].get(), memory);
    });
    std::vector<WorkerInfo> all;
    for (auto &p : parts)
        all.insert(all.end(), p.begin(), p.end());
    std::sort(all.begin(), all.end(), [](const auto &a, const auto &b) { return a.pid < b.pid; });
    co_return all;
}

namespace {
std::vector<asio::io_context *> one_loop(asio::io_context &io)
{
    return {&io};
}
} // namespace

Pool::Pool(std::shared_ptr<Host> host, asio::io_context &io, Options options)
    : Pool(std::move(host), one_loop(io), std::move(options))
{
}

Pool::Pool(std::shared_ptr<Host> host, const std::vector<asio::io_context *> &loops, Options options)
    : impl_(std::make_shared<Impl>(std::move(host), loops, std::move(options)))
{
}

void Pool::abandon()
{
    for (auto &s : impl_->shards)
        for (auto &[pid, w] : s->workers)
            w->channel().abandon();
}

Pool::~Pool()
{
    abandon();
    if (impl_->tmpl)
        impl_->tmpl->kill();
    // Whatever is still alive dies with us (the children also have PR_SET_PDEATHSIG), and no longer counts
    // on its CPU for another pool of this process.
    for (auto &s : impl_->shards)
        for (auto &[pid, w] : s->workers) {
            w->signal(SIGKILL);
            if (w->cpu() >= 0)
                impl_->host->cpus().release(pid);
        }
    impl_->host->cpus().unreserve(impl_->reserved_cpus);
}

awaitable<Result<void>> Pool::start()
{
    return impl_->start();
}

awaitable<void> Pool::exec(const relay::RequestContext &ctx, BodyRef body, Reply &reply, Client client,
                           unsigned loop)
{
    return impl_->shards[loop]->exec(ctx, body, reply, client);
}

awaitable<void> Pool::shutdown(std::chrono::steady_clock::time_point deadline)
{
    return impl_->shutdown(deadline);
}

awaitable<void> Pool::shutdown()
{
    return impl_->shutdown(std::chrono::steady_clock::now() + impl_->opt.destroy_timeout);
}

void Pool::kill_all(const std::string &why)
{
    impl_->kill_all(why);
}

awaitable<Result<ResetReport>> Pool::reset(std::string why)
{
    return impl_->reset(std::move(why));
}

awaitable<std::vector<WorkerInfo>> Pool::snapshot(bool memory)
{
    return impl_->snapshot(memory);
}

std::vector<WorkerInfo> Pool::workers() const
{
    std::vector<WorkerInfo> out;
    for (auto &s : impl_->shards)
        for (const auto &[pid, w] : s->workers)
            out.push_back(WorkerInfo{pid, state_name(w->state()), w->jobs(), w->created});
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.pid < b.pid; });
    return out;
}

unsigned Pool::serving_workers() const
{
    unsigned n = 0;
    for (auto &s : impl_->shards)
        n += s->serving_pub.load(std::memory_order_relaxed);
    return n;
}

namespace {
template <typename F> std::uint64_t sum(const std::vector<std::shared_ptr<Shard>> &shards, F f)
{
    std::uint64_t n = 0;
    for (auto &s : shards)
        n += f(*s);
    return n;
}
} // namespace

std::uint64_t Pool::spawned_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.spawned_total.load(); });
}
std::uint64_t Pool::recycled_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.recycled_total.load(); });
}
std::uint64_t Pool::dropped_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.allocator.dropped(); });
}
std::uint64_t Pool::waited_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.waited_total.load(); });
}
std::uint64_t Pool::lent_total() const
{
    return sum(impl_->shards, [](Shard &s) { return s.lent_total.load(); });
}

PoolStats Pool::stats() const
{
    PoolStats st;
    for (auto &sp : impl_->shards) {
        const Shard &s = *sp;
        st.requests += s.requests_total.load(std::memory_order_relaxed);
        st.waited += s.waited_total.load(std::memory_order_relaxed);
        st.rejected += s.rejected_total.load(std::memory_order_relaxed);
        st.jobs += s.jobs_total.load(std::memory_order_relaxed);
        st.spawned += s.spawned_total.load(std::memory_order_relaxed);
        for (unsigned c = 0; c < static_cast<unsigned>(Cause::count_); ++c)
            st.exits[c] += s.exits_total[c].load(std::memory_order_relaxed);
        s.queue_wait.read(st.queue_wait);
        s.boot_time.read(st.boot_time);
    }
    st.queued = impl_->shards[0]->queued_everywhere();
    return st;
}

} // namespace ferry::pool
