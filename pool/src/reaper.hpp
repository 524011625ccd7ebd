// Watching worker processes (internal to pool/): one SIGCHLD handler reaps every child with
// waitpid(-1, WNOHANG) (nginx-style; no pidfd, no per-process wait), and one coroutine per worker forwards
// its stderr to the log line by line, tagged with its pid.
#pragma once

#include "ferry/base/io.hpp"
#include "worker.hpp"

#include <boost/asio/signal_set.hpp>

#include <functional>
#include <memory>
#include <string_view>

namespace ferry::pool {

class Reaper {
public:
    // `on_exit(pid, wait_status)` runs for every child reaped.
    Reaper(asio::io_context &io, std::function<void(int pid, int status)> on_exit);

    // Reaps until stop(). `self` keeps its owner alive (an aliasing pointer into it).
    static awaitable<void> run(std::shared_ptr<Reaper> self);
    void stop();

private:
    asio::signal_set sigchld_;
    std::function<void(int, int)> on_exit_;
};

// Logs each line the worker writes to stderr ("pid 123: ..."), keeping the last 2 KiB in w->stderr_tail() for
// boot error messages; returns at EOF. A line printed while it boots is a warning, at debug when
// `repeated_at_boot` says another worker already printed it; later lines are the app's own: info.
awaitable<void> forward_stderr(WorkerPtr w, std::function<bool(std::string_view)> repeated_at_boot = nullptr);

} // namespace ferry::pool
