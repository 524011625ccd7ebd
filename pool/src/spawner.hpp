// Starting workers (internal to pool/): the command and environment, the back-off after boot failures (a
// crash storm must not become a spawn storm), launching one process, the PID handshake, and the message that
// says why a worker failed to boot. The pool decides how many workers to start and when.
#pragma once

#include "affinity.hpp"
#include "condition.hpp"
#include "ferry/base/result.hpp"
#include "ferry/pool/host.hpp"
#include "ferry/pool/pool.hpp"
#include "launch.hpp"
#include "worker.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::pool {

namespace detail {
// Whether `exe` (a path or a name) is PHP's CLI by its name: php, php8.2, php-cli, /usr/local/bin/php.
bool is_php_cli(const std::string &exe);
} // namespace detail

// How a pool reports its workers' boot failures, shared by every loop's spawner (thread-safe): a crash storm
// once per back-off step, not once per worker or per loop, and a PHP message that every booting worker prints
// once per failure streak.
class BootReport {
public:
    // After a failure: the line to log at error, or empty when a failure of this step (`step`: the back-off
    // before the reporting loop's next try) was already reported. The line counts the failures in a row (of
    // the pool) and those not reported since the last line.
    std::string failure(const std::string &message, std::chrono::milliseconds step);
    // Whether `line`, printed on stderr by a booting worker, was already printed by another one since the
    // last worker that booted. At most 64 lines and 64 KiB are remembered.
    bool line_repeated(std::string_view line);
    // A worker booted: the next failure is news.
    void booted();
    // How many workers of the pool booted after a failure (any loop): a back-off ends when it changes.
    std::uint64_t recoveries() const { return recoveries_.load(std::memory_order_relaxed); }

private:
    std::atomic<std::uint64_t> recoveries_{0};
    std::mutex mu_;
    std::chrono::steady_clock::time_point quiet_until_{};
    unsigned in_a_row_ = 0, unreported_ = 0;
    std::vector<std::string> lines_;
    std::size_t lines_bytes_ = 0;
};

class Spawner {
public:
    // `host`: the process's (its CPUs for a new process, the fork template's file); `stopping` cuts a
    // back-off short; `report` is the pool's (every loop's spawner shares it).
    Spawner(asio::io_context &io, const Options &opt, const Host &host, const Flag &stopping,
            BootReport &report);

    // Resolves the command in PATH and builds the workers' environment; the error names a missing command.
    Result<void> prepare();

    // Waits before the next spawn after consecutive boot failures: 100 ms, doubling up to 12.8 s; nothing
    // after a success. Returns early when the pool stops or a worker boots meanwhile.
    awaitable<void> back_off();
    // Starts one process (state spawning) on a fresh worker owned by loop `home`; its channel is not read
    // yet.
    Result<WorkerPtr> launch(unsigned home = 0);
    // Starts one process on descriptors of the caller's (the child's ends of three pipes): its pid. Reads
    // only what prepare() set, so another loop's thread may call it.
    Result<int> launch_on(int in_fd, int out_fd, int err_fd) const;
    // Starts the fork template's process (docs/protocol.md §8): the same command, a unix socket on fd 3.
    // `php_level`: with `-d auto_prepend_file=` the embedded prefork.php after argv[0] (§8.1), a template of
    // PHP itself for a worker that is not Ferry's library; only when php_level_possible().
    Result<WorkerPtr> launch_template(bool php_level = false);
    // Whether the command runs PHP's CLI directly (argv[0] named php, php8.2, php-cli...), which a PHP-level
    // template needs (a wrapper script would not pass the prepend on).
    bool php_level_possible() const;
    // The PID handshake (docs/protocol.md §2): our pid, the worker's pid back (and its context codec), within
    // Options::boot_timeout. The error says what went wrong, in words for the log. `as_template` asks the
    // process to be the fork template; its answer is in w->template_ok() / w->not_template().
    awaitable<Result<void>> handshake(WorkerPtr w, bool as_template = false);
    // The message for a worker that failed to boot: the error, how the process ended, its last stderr, and
    // `command` (the worker command line) when given.
    static std::string boot_failure(const Worker &w, const std::string &error,
                                    const std::string &command = {});
    // The worker command as one line ("php worker.php"), for messages.
    std::string command_line() const;

    // Consecutive boot failures; the last one's message.
    void booted();
    void boot_failed(std::string message) { ++failures_, last_error_ = std::move(message); }
    unsigned failures() const { return failures_; }
    const std::string &last_error() const { return last_error_; }

    // After boot_failed(): the line to log at error, or empty (BootReport::failure, this loop's step).
    std::string report_failure();
    // BootReport::line_repeated.
    bool boot_line_repeated(std::string_view line) { return report_.line_repeated(line); }

private:
    // What a child takes from the process rather than from the launching thread (the Host's).
    detail::Inherit inherit() const
    {
        return {host_.cpus().spawn_affinity(), host_.worker_descriptor_limit()};
    }

    asio::io_context &io_;
    const Options &opt_;
    const Host &host_;
    const Flag &stopping_;
    std::string exe_;
    std::vector<std::string> args_, env_;
    unsigned failures_ = 0;
    std::string last_error_;
    BootReport &report_;
};

} // namespace ferry::pool
