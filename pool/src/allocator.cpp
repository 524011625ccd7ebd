#include "allocator.hpp"

#include "ferry/base/peer.hpp"

#include <algorithm>

namespace ferry::pool {

namespace {
constexpr auto recheck_client_after = std::chrono::milliseconds(10);
} // namespace

// Lives on the waiting request's frame.
struct Allocator::Waiter {
    Waiter(asio::io_context &io, Allocator *a) : timer(io), owner(a) {}
    ~Waiter()
    {
        if (queued) { // its frame ends while it waits (the loop was stopped for good)
            owner->waiters_.erase(std::find(owner->waiters_.begin(), owner->waiters_.end(), this));
            owner->publish_waiting();
        }
    }
    Waiter(const Waiter &) = delete;
    Waiter &operator=(const Waiter &) = delete;

    asio::steady_timer timer; // expires after the timeout; the hand-off cancels it
    Allocator *owner;
    bool queued = false; // in owner->waiters_
    WorkerPtr worker;
    std::string failure;    // set when the pool gave up on this waiter (shutdown, boot failures)
    std::int64_t since = 0; // when it queued (steady ns)
};

Allocator::Allocator(asio::io_context &io, std::chrono::milliseconds timeout) : io_(io), timeout_(timeout) {}

Allocator::~Allocator()
{
    for (Waiter *wt : waiters_)
        wt->queued = false; // it wakes at its deadline without a worker, or goes with its frame
}

std::int64_t Allocator::oldest() const
{
    return waiters_.empty() ? Published::no_waiter : waiters_.front()->since;
}

bool Allocator::offer(const WorkerPtr &w)
{
    if (offer_foreign(w)) {
        w->to(State::working);
        return true;
    }
    w->to(State::ready);
    idle_.push_back(w);
    publish_idle();
    return false;
}

bool Allocator::offer_foreign(const WorkerPtr &w)
{
    if (waiters_.empty())
        return false;
    Waiter *wt = waiters_.front();
    waiters_.pop_front();
    publish_waiting();
    wt->queued = false;
    wt->worker = w;
    wt->timer.cancel();
    return true;
}

WorkerPtr Allocator::take_idle()
{
    while (!idle_.empty()) {
        auto it = std::find_if(idle_.rbegin(), idle_.rend(), [](const WorkerPtr &c) { return !c->going(); });
        auto pick = it != idle_.rend() ? std::prev(it.base()) : std::prev(idle_.end());
        WorkerPtr w = std::move(*pick);
        idle_.erase(pick);
        if (w->broken()) { // its stdout closed while idle (it is exiting), or it wrote what nobody asked for
            discard(w);
            continue;
        }
        w->to(State::working);
        publish_idle();
        return w;
    }
    publish_idle();
    return nullptr;
}

awaitable<Allocation> Allocator::wait(Client client)
{
    const auto timeout = timeout_; // after a wake without a worker, nothing of the allocator is touched
    Waiter wt(io_, this);
    wt.timer.expires_after(timeout); // queued at expiry() - timeout
    wt.since = (wt.timer.expiry() - timeout).time_since_epoch().count();
    waiters_.push_back(&wt);
    wt.queued = true;
    publish_waiting();
    if (on_queued)
        on_queued();
    co_await wt.timer.async_wait(nothrow);
    if (wt.worker) {
        if (client.fd >= 0 &&
            std::chrono::steady_clock::now() - (wt.timer.expiry() - timeout) >= recheck_client_after &&
            peer_reset(client.fd)) {
            give_back(wt.worker); // to the next waiter
            ++dropped_;
            co_return Allocation{nullptr, Outcome::client_gone,
                                 "the client went away while its request waited for a worker"};
        }
        co_return Allocation{std::move(wt.worker), Outcome::ok, {}};
    }
    if (wt.queued) { // timed out (fail_waiters() and offer() dequeue)
        waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &wt));
        wt.queued = false;
        publish_waiting();
    }
    if (wt.failure.empty())
        wt.failure = "no free worker within allocate_timeout (" + std::to_string(timeout.count()) + " ms)";
    co_return Allocation{nullptr, Outcome::no_worker, std::move(wt.failure)};
}

void Allocator::fail_waiters(const std::string &why)
{
    while (!waiters_.empty()) {
        Waiter *wt = waiters_.front();
        waiters_.pop_front();
        wt->queued = false;
        wt->failure = why;
        wt->timer.cancel();
    }
    publish_waiting();
}

void Allocator::remove(const WorkerPtr &w)
{
    auto it = std::find(idle_.begin(), idle_.end(), w);
    if (it != idle_.end()) {
        idle_.erase(it);
        publish_idle();
    }
}

} // namespace ferry::pool
