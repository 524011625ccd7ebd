// The server's child processes, for routing their exits (internal to pool/; one per process, held by the
// Host). Every pool's reaper calls waitpid(-1) and so may reap another pool's worker: it looks the pid up
// here and hands the exit to the pool that owns it. Thread-safe (one mutex); written when a process starts or
// ends, never per request.
#pragma once

#include "ferry/base/result.hpp"

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace ferry::pool::detail {

// What owns child processes: told of each one's exit, on the thread that reaped it.
class ExitListener {
public:
    // `part`: what the owner said when it recorded the pid (a pool: its shard, or its fork template).
    virtual void exited(int pid, int status, unsigned part) = 0;

protected:
    ~ExitListener() = default;
};

class ProcessTable {
public:
    // Starts a process with `start` and records it as `owner`'s, under the table's lock: a reaper cannot
    // look the pid up before it is recorded, however soon the process exits.
    Result<int> start(ExitListener &owner, unsigned part, const std::function<Result<int>()> &start);
    // Records that `pid` is `owner`'s; the wait status instead when it has already been reaped (a forked
    // worker's pid is known only when the template answers, and it may exit before).
    std::optional<int> claim(int pid, ExitListener &owner, unsigned part);
    // `pid` is nobody's any more (its owner saw it end another way).
    void forget(int pid);
    // Every pid of `owner`'s is forgotten (the owner is going away).
    void forget_all(const ExitListener &owner);
    // Calls `f(pid)` for each of `owner`'s pids, under the lock (a pid cannot be reaped and reused
    // meanwhile).
    void for_each(const ExitListener &owner, const std::function<void(int pid)> &f);
    // The same for the pids `owner` recorded with `part`.
    void for_each(const ExitListener &owner, unsigned part, const std::function<void(int pid)> &f);

    // A reaper reaped `pid`: its owner is told (outside the lock), or, when nobody has claimed it yet, the
    // exit is kept for claim() (at most max_unclaimed, for at most unclaimed_for: what a dead worker left
    // behind and the kernel re-parented to us, as a child subreaper, is never claimed). `now`: for tests.
    void reaped(int pid, int status,
                std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

    static constexpr std::size_t max_unclaimed = 64;
    static constexpr std::chrono::seconds unclaimed_for{10};

private:
    struct Owner {
        ExitListener *listener;
        unsigned part;
    };
    struct Unclaimed {
        int pid, status;
        std::chrono::steady_clock::time_point at;
    };
    std::mutex mu_;
    std::unordered_map<int, Owner> owners_;
    std::deque<Unclaimed> unclaimed_;
};

} // namespace ferry::pool::detail
