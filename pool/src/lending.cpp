// Several loops (docs/architecture.md, "Several loops"): a loop without an idle worker runs the request on an
// idle worker of another loop, and a worker that goes idle serves another loop's oldest waiting request when
// that one has waited clearly longer; a lent worker runs on its own loop (the rest of its reply is read
// there too: Reply::next) and goes back home when done.
#include "group.hpp"

#include <atomic>

namespace ferry::pool {

namespace {
// With several loops, a worker freed on one loop serves another loop's oldest waiting request instead of
// its own loop's when that one has waited this much longer (or nobody waits here): the hand-over costs two
// trips between threads, worth it only against a real imbalance.
constexpr std::int64_t lend_margin_ns = 1'000'000;
} // namespace

Shard *Shard::waiting_elsewhere()
{
    const std::int64_t mine = allocator.oldest();
    std::int64_t best = mine == Allocator::Published::no_waiter ? mine : mine - lend_margin_ns;
    Shard *target = nullptr;
    for (unsigned i = 0; i < shard_count(); ++i) {
        if (i == index)
            continue;
        std::int64_t t = shard(i).published.oldest.load();
        if (t < best) {
            best = t;
            target = &shard(i);
        }
    }
    return target;
}

void Shard::lend(const WorkerPtr &w, Shard &target)
{
    w->to(State::working);
    lent_total.fetch_add(1, std::memory_order_relaxed);
    asio::post(target.io, [t = target.shared_from_this(), w] { t->accept_lent(w); });
}

void Shard::accept_lent(const WorkerPtr &w)
{
    if (stopping.raised() || !allocator.offer_foreign(w))
        give_back(w);
}

void Shard::give_back(const WorkerPtr &w)
{
    if (w->home() == index) {
        make_available(w);
        return;
    }
    Shard &home = shard(w->home());
    asio::post(home.io, [h = home.shared_from_this(), w] { h->make_available(w); });
}

void Shard::queued()
{
    if (on_demand)
        maintain();
    for (unsigned i = 0; i < shard_count(); ++i)
        if (i != index && shard(i).published.idle.load() > 0)
            asio::post(shard(i).io,
                       [s = shard(i).shared_from_this(), me = shared_from_this()] { s->lend_idle_to(*me); });
}

void Shard::lend_idle_to(Shard &target)
{
    if (stopping.raised() || target.published.oldest.load() == Allocator::Published::no_waiter)
        return;
    if (WorkerPtr w = allocator.take_idle())
        lend(w, target);
}

awaitable<Shard::Step> Shard::run_idle(const relay::RequestContext &ctx, BodyRef body, Client client,
                                       Reply &res)
{
    if (stopping.raised())
        co_return Step::none;
    WorkerPtr w = allocator.take_idle();
    if (!w)
        co_return Step::none;
    co_return co_await run(w, ctx, body, client, res);
}

awaitable<Shard::Step> Shard::run_elsewhere(const relay::RequestContext &ctx, BodyRef body, Client client,
                                            Reply &res)
{
    for (unsigned i = 0; i < shard_count(); ++i) {
        Shard &other = shard(i);
        if (i == index || other.published.idle.load() == 0)
            continue;
        Step step = co_await asio::co_spawn(other.io, other.run_idle(ctx, body, client, res), use_awaitable);
        if (step != Step::none)
            co_return step;
    }
    co_return Step::none;
}

awaitable<Shard::Step> Shard::run_on_home(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body,
                                          Client client, Reply &res)
{
    Shard &home = shard(w->home());
    co_return co_await asio::co_spawn(home.io, home.run(w, ctx, body, client, res), use_awaitable);
}

} // namespace ferry::pool
