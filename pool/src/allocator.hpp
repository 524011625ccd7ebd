// Handing workers to requests (internal to pool/): the idle set and the FIFO of requests waiting for a
// worker, each with its own allocate_timeout. A released worker goes to the oldest waiter, whose timer the
// hand-off cancels after storing the worker (never a race of a hand-off against a timer with operator||: the
// loser's result would be dropped and the worker lost). Knows nothing of processes: testable on its own.
#pragma once

#include "ferry/pool/pool.hpp"
#include "worker.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace ferry::pool {

// What a wait for a worker gave: a worker, or why not (no_worker: timed out or failed by the pool;
// client_gone: the client left while its request waited).
struct Allocation {
    WorkerPtr worker;
    Outcome outcome = Outcome::ok;
    std::string why;
};

class Allocator {
public:
    Allocator(asio::io_context &io, std::chrono::milliseconds timeout);
    // Requests still queued are detached: their frames, destroyed with the loop, may go after the allocator.
    ~Allocator();
    Allocator(const Allocator &) = delete;
    Allocator &operator=(const Allocator &) = delete;

    // A broken worker found in the idle set (its stdout closed or spoke while idle): the pool ends it.
    std::function<void(const WorkerPtr &)> discard;
    // A worker handed to a waiter whose client left meanwhile: the pool makes it available again.
    std::function<void(const WorkerPtr &)> give_back;

    // Hands `w` to the oldest waiter (state working) and returns true, or keeps it idle (state ready) and
    // returns false.
    bool offer(const WorkerPtr &w);
    // A worker of another loop, lent to this one (already working, its state is its own loop's): hands it to
    // the oldest waiter and returns true, or returns false (nobody waits any more: it goes back).
    bool offer_foreign(const WorkerPtr &w);
    // An idle worker (state working), or null: the most recently used first (warm caches), one past max_jobs
    // only when no other is idle (it serves only while its replacement boots); broken ones go to `discard`.
    WorkerPtr take_idle();
    // Waits up to the timeout for a worker handed over by offer(). A request that waited long may have lost
    // its client meanwhile: asked once at dispatch (a system call), only after a wait too long for a client
    // to still be waiting without a reason; under ordinary load requests wait far less and pay nothing.
    awaitable<Allocation> wait(Client client);
    // Fails every waiter now with `why` (shutdown, no worker can boot).
    void fail_waiters(const std::string &why);
    // Takes `w` out of the idle set (it is stopping or broken).
    void remove(const WorkerPtr &w);

    // With several loops: what other loops may read of this allocator without a lock (docs/architecture.md,
    // "Several loops"). Published after every change of the idle set or the queue, sequentially consistent,
    // so that a waiter that publishes itself and then looks for idle workers elsewhere, and a worker that
    // goes idle and then looks for waiters elsewhere, cannot both miss each other.
    struct Published {
        std::atomic<std::uint32_t> idle{0};
        std::atomic<std::uint32_t> waiting{0};
        std::atomic<std::int64_t> oldest{no_waiter}; // when the oldest waiter queued (steady ns)
        static constexpr std::int64_t no_waiter = INT64_MAX;
    };
    void publish_to(Published *p) { published_ = p; }
    // Called right after a request joined the queue (and was published).
    std::function<void()> on_queued;
    // When the oldest waiter queued (steady clock, ns); Published::no_waiter if none.
    std::int64_t oldest() const;

    std::size_t idle() const { return idle_.size(); }
    std::size_t waiting() const { return waiters_.size(); }
    // Requests dropped because their client left while they waited.
    std::uint64_t dropped() const { return dropped_; }

private:
    struct Waiter;
    asio::io_context &io_;
    std::chrono::milliseconds timeout_;
    std::vector<WorkerPtr> idle_; // most recently used last
    std::deque<Waiter *> waiters_;
    std::uint64_t dropped_ = 0;
    Published *published_ = nullptr; // only with several loops

    void publish_idle()
    {
        if (published_)
            published_->idle.store(static_cast<std::uint32_t>(idle_.size()));
    }
    void publish_waiting()
    {
        if (published_) {
            published_->waiting.store(static_cast<std::uint32_t>(waiters_.size()));
            published_->oldest.store(oldest());
        }
    }
};

} // namespace ferry::pool
