// The fork template (internal to pool/; Options::fork, docs/protocol.md §8): one PHP process per pool that
// booted the application once and never serves; each new worker is a fork of it, so replacing a worker
// (max_jobs, a crash, a reset) costs a fork instead of a PHP boot. The template runs on the pool's first
// loop; shards on other loops reach it by co_spawn. The server is a child subreaper, so forked workers are
// re-parented to it and reaped like the workers it starts itself.
#pragma once

#include "condition.hpp"
#include "ferry/base/result.hpp"
#include "ferry/pool/pool.hpp"
#include "spawner.hpp"
#include "worker.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::pool {

class ForkTemplate : public std::enable_shared_from_this<ForkTemplate> {
public:
    using clock = std::chrono::steady_clock;

    // The descriptors a new worker gets as its stdin, stdout and stderr; fork() closes them.
    struct ChildEnds {
        int in = -1, out = -1, err = -1;
        void close();
    };

    // `track(pid, alive)` records the template's pid for the reaper (alive; its wait status if it was already
    // reaped) and forgets it (exited).
    ForkTemplate(asio::io_context &io, const Options &opt, Spawner &spawner, const Flag &stopping,
                 std::function<std::optional<int>(int pid, bool alive)> track);

    // What fork() gives: the new worker's pid, or why there is none; `boot_failed` when the template could
    // not boot the application (the error is that boot failure's message): a worker started on its own would
    // fail the same way. Returned by value, so that a caller on another loop reads nothing of the template's
    // state.
    struct Forked {
        int pid = 0;
        std::string error;
        bool boot_failed = false;
        // Where the worker's boot counts from: when the fork command went to a template known to wait for
        // one, else (its first fork: the command may have waited in its socket while it booted the app)
        // when it answered. Not from the request for the worker, which may have waited for the template's
        // start or for another fork.
        clock::time_point sent{};
    };
    // Forks one worker from the template, starting the template first if there is none. No pid when there is
    // no usable template (it cannot be one, it failed to start, it died, it broke the protocol); the caller
    // then starts the worker itself. One fork at a time; callers queue. `gen`: the pool's reset generation; a
    // template started before it (older code) is replaced first.
    awaitable<Forked> fork(ChildEnds ends, std::uint64_t gen = 0);
    // A rolling reset to `gen`: the back-off is cleared; the next fork replaces the template.
    void renew(std::uint64_t gen);

    // The worker command cannot be a template, not even a PHP-level one (no ext-ffi, not run by php
    // directly…): forking is off for good.
    bool disabled() const { return disabled_.load(std::memory_order_relaxed); } // any loop may ask
    int pid() const { return proc_ && !proc_->exited() ? proc_->pid() : 0; }

    // The reaper saw a template (this one or a retired one) end.
    void on_exit(int pid, int status);
    // Ends the template (EOF on its socket, then SIGKILL at the deadline) and waits for it.
    awaitable<void> stop(clock::time_point deadline);
    // Kills it now (the pool's destructor, a fatal error).
    void kill();

private:
    awaitable<Result<void>> ensure(std::uint64_t gen, bool &boot_failed);
    awaitable<Result<int>> fork_one(ChildEnds &ends, std::uint64_t gen, Forked &out);
    // Ends the template: `why` non-empty = a failure (logged unless `quiet`, with a back-off); empty =
    // retired (a reset, or it cannot be a template).
    void retire(const std::string &why, bool quiet = false);
    // The template cannot be one (`why`, logged): forking is off for good, the process retired.
    Result<void> give_up(const std::string &why);

    asio::io_context &io_;
    const Options &opt_;
    Spawner &spawner_;
    const Flag &stopping_;
    std::function<std::optional<int>(int, bool)> track_;
    const std::string command_;  // the fork command's frame (docs/protocol.md §8), with "fast_exit" per opt_
    WorkerPtr proc_;             // the template process (its channel: the socket as stdin, frames on stdout)
    std::vector<WorkerPtr> old_; // retired templates whose exit was not reaped yet
    bool busy_ = false;
    bool answered_ = false; // proc_ has answered a fork command: it is past the app's boot, in its fork loop
    Condition turn_;
    std::atomic<bool> disabled_{false};
    unsigned failures_ = 0;
    clock::time_point retry_at_{};
    std::uint64_t gen_ = 0; // of the template running
    // Templates are PHP-level ones (prefork.php, §8.1): fork: php, or the worker is not Ferry's library.
    bool php_level_;
};

} // namespace ferry::pool
