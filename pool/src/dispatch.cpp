// One request (Pool::exec): an idle worker of this loop, of another loop, or a wait in the queue; the request
// written, the reply's first head read (exchange.hpp); a worker that refuses or breaks before the request ran
// is replaced and the request retried on another one. The rest of a reply is pulled by its caller
// (Reply::next, on the worker's loop) and the worker settled when the caller finishes it (Reply::finish).
// docs/protocol.md §2-§4.
#include "group.hpp"

#include "ferry/base/log.hpp"

namespace ferry::pool {

unsigned Shard::group_workers() const
{
    return group.opt.num_workers;
}

bool Shard::hopeless() const
{
    unsigned serving_anywhere = 0;
    bool failing = false;
    for (auto &s : group.shards) {
        serving_anywhere += s->serving_pub.load(std::memory_order_relaxed);
        failing = failing || s->failing_pub.load(std::memory_order_relaxed);
    }
    return serving_anywhere == 0 && failing;
}

awaitable<void> Shard::exec(const relay::RequestContext &ctx, BodyRef body, Reply &res, Client client)
{
    res.finish(); // the caller's earlier request
    res.outcome = Outcome::ok;
    res.message.clear();
    res.worker_pid = 0;
    RequestFrame frame; // the request as written to a worker of this loop
    unsigned skipped_broken = 0;
    const unsigned total_workers = group_workers();
    bump(requests_total);
    // A worker may ask to stop instead of answering: the same request goes to another worker.
    for (unsigned attempt = 0; attempt <= total_workers + 1; ++attempt) {
        WorkerPtr w = stopping.raised() ? nullptr : allocator.take_idle(); // no coroutine frame
        Step step = Step::none;
        if (!w) {
            if (stopping.raised()) {
                res.outcome = Outcome::no_worker;
                res.message = "server is shutting down";
                co_return;
            }
            if (hopeless()) {
                res.outcome = Outcome::no_worker;
                res.message = "no worker available: " + (spawner.last_error().empty()
                                                             ? std::string("workers fail to boot (see above)")
                                                             : spawner.last_error());
                co_return;
            }
            if (multi())
                step = co_await run_elsewhere(ctx, body, client, res);
            if (step == Step::none && opt.max_queue_size > 0 && queued_everywhere() >= opt.max_queue_size) {
                // max_queue_size: a full queue answers at once (503 with Retry-After) instead of waiting.
                bump(rejected_total);
                res.outcome = Outcome::no_worker;
                res.message = "the queue is full (max_queue_size " + std::to_string(opt.max_queue_size) +
                              " requests wait for a worker)";
                co_return;
            }
            if (step == Step::none) {
                const auto queued_at = clock::now();
                Allocation a = co_await allocator.wait(client);
                bump(waited_total);
                const auto us = static_cast<std::uint64_t>(
                    std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - queued_at).count());
                queue_wait.observe(us);
                if (us > longest_wait_us.load(std::memory_order_relaxed))
                    longest_wait_us.store(us, std::memory_order_relaxed);
                if (!a.worker) {
                    res.outcome = a.outcome;
                    res.message = std::move(a.why);
                    co_return;
                }
                w = std::move(a.worker);
            }
        }
        if (w && w->home() != index) {
            step = co_await run_on_home(w, ctx, body, client, res);
        } else if (w && !begin(w, ctx, body, client, res, frame)) {
            step = Step::skipped;
        } else if (w) { // run(), inline: no coroutine frame of its own
            error_code wec = co_await w->channel().write(frame.parts());
            if (!wec && body.fd >= 0)
                wec = co_await WorkerExchange::write_file(w->channel().stdin_pipe(), body.fd, body.size);
            if (wec) {
                step = write_failed(w, wec);
            } else {
                AfterReply after = co_await exchange.read(w, res);
                step = finished(w, after, res);
            }
        }
        switch (step) {
        case Step::done:
            res.foreign_ = res.shard_ && res.shard_.get() != this; // a worker of another loop holds it
            co_return;
        case Step::skipped:
            if (++skipped_broken <= 2 * total_workers)
                --attempt; // not the worker's refusal: does not count against the retry bound
            continue;
        case Step::retry:
        case Step::none:
            continue;
        }
    }
    res.outcome = Outcome::no_worker;
    res.message = "every worker asked to stop instead of answering";
    co_return;
}

bool Shard::begin(const WorkerPtr &w, const relay::RequestContext &ctx, BodyRef body, Client client,
                  Reply &res, RequestFrame &frame)
{
    if (!w->channel().claim()) {
        // It wrote more after its last reply, or while idle (seen by the idle watch, or by claim()'s read
        // of its pipe just now, before this request was written): retired, and this request goes to
        // another worker.
        kill_broken(w, Cause::error);
        return false;
    }
    res.worker_pid = w->pid();
    exchange.prepare(*w, ctx, body, frame);
    w->exec().begin(ctx, client.fd, supervisor.now()); // the supervisor's own tick: no clock read per request
    return true;
}

Shard::Step Shard::write_failed(const WorkerPtr &w, error_code wec)
{
    // The worker died before it could read the request (e.g. while idle, its exit not reaped yet):
    // nothing ran, so another worker gets it.
    log::warn("pool",
              w->tag() + ": writing the request failed (" + wec.message() + "); retrying on another worker");
    kill_broken(w, Cause::crash);
    return Step::retry;
}

Shard::Step Shard::finished(const WorkerPtr &w, AfterReply after, Reply &res)
{
    if (after == AfterReply::hold) { // the caller reads on (Reply::next) and finishes it (settle)
        res.worker_ = w;
        res.shard_ = shared_from_this();
        return Step::done;
    }
    return settled(w, after);
}

Shard::Step Shard::settled(const WorkerPtr &w, AfterReply after)
{
    switch (after) {
    case AfterReply::hold: // not given here
        return Step::done;
    case AfterReply::release:
        release(w);
        return Step::done;
    case AfterReply::kill:
        kill_broken(w, w->exited() ? Cause::crash : Cause::error);
        return Step::done;
    case AfterReply::kill_later: // the client gets its 504 before the worker is killed
        asio::post(io, [self = shared_from_this(), w] { self->kill_broken(w, Cause::exec_ttl); });
        return Step::done;
    case AfterReply::stop_retry:
        recycled_total.fetch_add(1, std::memory_order_relaxed);
        w->blame_if_none(Cause::worker_stop);
        start_stop(w);
        return Step::retry;
    case AfterReply::kill_retry:
        recycled_total.fetch_add(1, std::memory_order_relaxed);
        kill_broken(w, Cause::worker_stop);
        return Step::retry;
    case AfterReply::kill_resend:
        kill_broken(w, Cause::error);
        return Step::retry;
    }
    return Step::done;
}

awaitable<Shard::Step> Shard::run(WorkerPtr w, const relay::RequestContext &ctx, BodyRef body, Client client,
                                  Reply &res)
{
    RequestFrame frame;
    if (!begin(w, ctx, body, client, res, frame))
        co_return Step::skipped;
    error_code wec = co_await w->channel().write(frame.parts());
    if (!wec && body.fd >= 0)
        wec = co_await WorkerExchange::write_file(w->channel().stdin_pipe(), body.fd, body.size);
    if (wec)
        co_return write_failed(w, wec);
    AfterReply after = co_await exchange.read(w, res);
    co_return finished(w, after, res);
}

awaitable<void> Shard::pull(Reply *r)
{
    auto self = shared_from_this();
    Reply &res = *r;
    WorkerPtr w = res.worker_;
    AfterReply after = co_await exchange.read(w, res);
    if (after == AfterReply::hold)
        co_return;
    res.worker_.reset();
    res.shard_.reset();
    settled(w, after);
}

void Shard::settle(const WorkerPtr &w, bool ended)
{
    // The caller is done with its client: the descriptor may be closed and reused from now on, so the
    // supervisor asks it nothing more (client_gone_ttl).
    w->exec().forget_client();
    if (ended) {
        settled(w, exchange.finish(*w));
        return;
    }
    asio::co_spawn(io, stop_stream(shared_from_this(), w), log_exceptions{"stop stream"});
}

awaitable<void> Shard::stop_stream(std::shared_ptr<Shard> self, WorkerPtr w)
{
    AfterReply after = co_await self->exchange.cancel_stream(w);
    self->settled(w, after);
}

} // namespace ferry::pool
