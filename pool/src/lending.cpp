// Several loops (docs/architecture.md, "Several loops"): a loop without an idle worker runs the request on an
// idle worker of another loop, and a worker that goes idle serves another loop's oldest waiting request when
// that one has waited clearly longer; a lent worker runs on its own loop and goes back home when done.
#include "group.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <atomic>
#include <optional>

namespace ferry::pool {

namespace {
// With several loops, a worker freed on one loop serves another loop's oldest waiting request instead of
// its own loop's when that one has waited this much longer (or nobody waits here): the hand-over costs two
// trips between threads, worth it only against a real imbalance.
constexpr std::int64_t lend_margin_ns = 1'000'000;

// Runs a sink's calls on the client's loop for a request that runs on another loop's worker.
class ProxySink final : public StreamSink {
public:
    ProxySink(StreamSink &real, asio::any_io_executor client) : real_(real), client_(std::move(client)) {}

    awaitable<bool> on_informational(const relay::ResponseContext &head) override
    {
        co_return co_await asio::co_spawn(client_, real_.on_informational(head), use_awaitable);
    }
    awaitable<bool> on_chunk(const relay::ResponseContext &head, std::string_view body, bool last) override
    {
        co_return co_await asio::co_spawn(client_, real_.on_chunk(head, body, last), use_awaitable);
    }
    awaitable<bool> write_whole(const relay::ResponseContext &head, std::string_view body) override
    {
        co_return co_await asio::co_spawn(client_, real_.write_whole(head, body), use_awaitable);
    }
    // Asked only by the allocator of the client's own loop (never on a lent worker's loop).
    bool client_gone() override { return false; }
    // Asked by the worker's loop (its supervisor): the answer comes from the client's loop a tick later. The
    // question is posted before the exchange's completion, from the same loop, so it runs while this sink
    // still exists (a loop runs what is posted to it in order).
    bool client_left() override
    {
        if (!asking_.exchange(true))
            asio::post(client_, [this] {
                left_.store(real_.client_left());
                asking_.store(false);
            });
        return left_.load();
    }

private:
    StreamSink &real_;
    asio::any_io_executor client_;
    std::atomic<bool> asking_{false}, left_{false};
};
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
    if (w->home == index) {
        make_available(w);
        return;
    }
    Shard &home = shard(w->home);
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

awaitable<Shard::Step> Shard::run_idle(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                                       StreamSink *sink, Reply &res)
{
    if (stopping.raised())
        co_return Step::none;
    WorkerPtr w = allocator.take_idle();
    if (!w)
        co_return Step::none;
    co_return co_await run(w, ctx, body, body_out, sink, res);
}

awaitable<Shard::Step> Shard::run_elsewhere(const relay::RequestContext &ctx, BodyRef body,
                                            std::string &body_out, StreamSink *sink, Reply &res)
{
    std::optional<ProxySink> proxy;
    for (unsigned i = 0; i < shard_count(); ++i) {
        Shard &other = shard(i);
        if (i == index || other.published.idle.load() == 0)
            continue;
        if (sink && !proxy)
            proxy.emplace(*sink, co_await asio::this_coro::executor);
        Step step = co_await asio::co_spawn(
            other.io, other.run_idle(ctx, body, body_out, proxy ? &*proxy : nullptr, res), use_awaitable);
        if (step != Step::none)
            co_return step;
    }
    co_return Step::none;
}

awaitable<Shard::Step> Shard::run_on_home(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body,
                                          std::string &body_out, StreamSink *sink, Reply &res)
{
    Shard &home = shard(w->home);
    std::optional<ProxySink> proxy;
    if (sink)
        proxy.emplace(*sink, co_await asio::this_coro::executor);
    co_return co_await asio::co_spawn(
        home.io, home.run(w, ctx, body, body_out, proxy ? &*proxy : nullptr, res), use_awaitable);
}

} // namespace ferry::pool
