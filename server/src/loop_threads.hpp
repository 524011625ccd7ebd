// The server's event loops on their threads (internal to server/): loop 0 on the caller's thread, the others
// on their own, each running until what it runs has ended — a stop is cancel and join, not a loop stopped
// with work still in it (docs/architecture.md, "Stopping").
#pragma once

#include "loop.hpp"

#include <boost/asio/executor_work_guard.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ferry::server::detail {

class LoopThreads {
public:
    explicit LoopThreads(std::vector<Loop *> loops);
    ~LoopThreads();
    LoopThreads(const LoopThreads &) = delete;
    LoopThreads &operator=(const LoopThreads &) = delete;

    // Starts loops 1..n on threads named "ferry-loop-N", each held open (idle until work is posted) until
    // finish().
    void start();
    // The server is done (any thread, once): the loops are no longer held open, and each returns as soon as
    // every task on it has ended. A loop still running `grace` later has a task its owner did not end: it is
    // stopped, a warning names it, and run() destroys what was left in it.
    void finish(std::chrono::milliseconds grace);
    // Runs loop 0 on this thread until it has ended, then joins the others. Gives the number of loops the
    // grace period stopped (0: every task ended by itself).
    unsigned run();

private:
    void ended(unsigned i);
    void watch(std::chrono::milliseconds grace);

    std::vector<Loop *> loops_;
    std::vector<std::optional<asio::executor_work_guard<Loop::executor_type>>> held_;
    std::vector<std::thread> threads_;
    std::thread watchdog_;
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<bool> running_;
    std::vector<bool> stopped_; // by the grace period
    bool finishing_ = false;
};

} // namespace ferry::server::detail
