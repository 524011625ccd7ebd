// Handing workers to requests (internal to pool/): the idle set and the FIFO of requests waiting for a
// worker, each with its own allocate_timeout. A released worker goes to the oldest waiter, whose timer the
// hand-off cancels after storing the worker (never a race of a hand-off against a timer with operator||: the
// loser's result would be dropped and the worker lost). Knows nothing of processes: testable on its own.
#pragma once

#include "ferry/pool/pool.hpp"
#include "worker.hpp"

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
    // An idle worker (state working), or null: the most recently used first (warm caches), one past max_jobs
    // only when no other is idle (it serves only while its replacement boots); broken ones go to `discard`.
    WorkerPtr take_idle();
    // Waits up to the timeout for a worker handed over by offer(). A request that waited long may have lost
    // its client meanwhile: asked once at dispatch (a system call), only after a wait too long for a client
    // to still be waiting without a reason; under ordinary load requests wait far less and pay nothing.
    awaitable<Allocation> wait(StreamSink *client);
    // Fails every waiter now with `why` (shutdown, no worker can boot).
    void fail_waiters(const std::string &why);
    // Takes `w` out of the idle set (it is stopping or broken).
    void remove(const WorkerPtr &w);

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
};

} // namespace ferry::pool
