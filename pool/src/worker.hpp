// One worker process (internal to pool/): its pid and state, its frame channel (ferry/relay/channel.hpp) and
// stderr, the signals it gets, the jobs it did, and how it is stopped.
#pragma once

#include "event.hpp"
#include "ferry/base/io.hpp"
#include "ferry/pool/stats.hpp"
#include "ferry/relay/channel.hpp"
#include "ferry/relay/context.hpp"

#include <boost/asio/readable_pipe.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

namespace ferry::pool {

// spawning → ready → working → ready | stopping → dead (RoadRunner's worker states, docs/architecture.md,
// "Workers"). The moves a worker may make are one table, in worker.cpp (Worker::to).
enum class State { spawning, ready, working, stopping, dead };

// Whether the table has the move `from` → `to` (staying where it is always is: a no-op). Inline: a request
// makes two moves (ready → working → ready).
constexpr bool allowed_move(State from, State to)
{
    if (from == to)
        return true;
    switch (from) {
    case State::spawning: // its handshake answered; stopped or killed while booting; exited
    case State::ready:    // taken by a request; stopped while idle; exited
    case State::working:  // released; stopped or killed (its request is done or broken); exited
        return to != State::spawning;
    case State::stopping: // a stopping worker only ends
        return to == State::dead;
    case State::dead:
        return false;
    }
    return false;
}

// Where a worker is in its replacement, moved by the supervisor's limits, a rolling reset and the shard when
// a replacement is ready: serving → marked → replaced → on_release, only forward, except that a marked
// worker serves on unmarked when new workers cannot boot (Shard::hold_replacements), and a stop while it
// works puts any worker on_release. Not its life (State): a marked or replaced worker still takes requests.
enum class Recycle : unsigned char {
    serving,   // nothing decided
    marked,    // a limit reached or a reset: its replacement is wanted; it serves on until that is ready
    replaced,  // its max_jobs replacement, started ahead of the limit, is ready: it takes only requests that
               // wait for a worker, and stops at max_jobs or when nobody waits
    on_release // it stops when its current request is done
};

constexpr bool allowed_recycle(Recycle from, Recycle to)
{
    if (from == to)
        return true;
    switch (from) {
    case Recycle::serving:
        return to == Recycle::marked || to == Recycle::on_release;
    case Recycle::marked:
        return true; // unmarked (hold_replacements), replaced, on_release
    case Recycle::replaced:
        return to == Recycle::on_release;
    case Recycle::on_release:
        return false;
    }
    return false;
}

const char *state_name(State s);
const char *recycle_name(Recycle r);
// "exited with code 3", "killed by signal 9 (SIGKILL)".
std::string describe_status(int wait_status);

struct Worker {
    Worker(asio::io_context &io, std::uint32_t max_payload);
    ~Worker();
    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;

    int pid = 0;
    unsigned home = 0; // the event loop whose shard owns it (its pipes are that loop's)
    int cpu = -1;      // the CPU it is pinned to (Options::cpu_affinity), -1: not pinned
    State state() const { return state_; }
    // Moves it to `next` when the table has that move (allowed_move); else nothing changes, false, and an
    // error line names the worker and the move (a bug in the pool, not in PHP).
    bool to(State next)
    {
        if (!allowed_move(state_, next))
            return refuse(next);
        state_ = next;
        return true;
    }
    // Its replacement (Recycle). going(): marked or later, no longer counted as a worker that stays.
    Recycle recycle() const { return recycle_; }
    bool going() const { return recycle_ != Recycle::serving; }
    // Moves it to `next` when the table has that move (allowed_recycle); else nothing changes, false, and an
    // error line names the worker and the move.
    bool recycle_to(Recycle next)
    {
        if (!allowed_recycle(recycle_, next))
            return refuse(next);
        recycle_ = next;
        return true;
    }
    // Its replacement is wanted for `why` (a limit, a reset): a serving worker is marked, one further on
    // stays where it is; the cause is `why` either way.
    void mark(Cause why)
    {
        if (recycle_ == Recycle::serving)
            recycle_ = Recycle::marked;
        cause_ = why;
    }
    // Why it is being replaced or was killed (counted when it exits); none while nothing was decided.
    Cause cause() const { return cause_; }
    void blame(Cause c) { cause_ = c; }
    void blame_if_none(Cause c)
    {
        if (cause_ == Cause::none)
            cause_ = c;
    }
    std::shared_ptr<relay::Channel> channel; // stdin and stdout: frames only
    asio::readable_pipe err;                 // the worker's log
    relay::Codec codec = relay::Codec::json;
    std::string wbuf; // the request context being encoded
    std::chrono::system_clock::time_point created = std::chrono::system_clock::now();
    std::string stderr_tail; // last bytes of stderr, for boot error messages

    // Jobs and recycling (the supervisor's).
    std::uint64_t jobs = 0;
    std::uint64_t max_jobs = 0; // with jitter; 0 = unlimited
    // Starting that replacement early: the next job count at which the request rate is measured, and the
    // job count and time of the last measurement (Supervisor::starts_early).
    std::uint64_t rate_check_jobs = ~0ull;
    std::uint64_t rate_base_jobs = 0;
    std::chrono::steady_clock::time_point rate_base_at;
    bool idle_boot = false; // booting under SCHED_IDLE (Options::recycle_priority) until restored
    // Rolling reset: the pool's generation when this worker was started (a reset makes older ones stale), the
    // time a stale busy worker must be done by (reset_timeout), and whether it was killed for it.
    std::uint64_t gen = 0;
    std::chrono::steady_clock::time_point reset_deadline = std::chrono::steady_clock::time_point::max();
    bool reset_killed = false;
    // Soft limits (the supervisor's), jittered per worker: when its ttl ends, its memory limit, when its
    // last request ended (idle_ttl); memory is also sampled after requests, when `memory_check_jobs` is
    // reached (set from the growth between the last two readings).
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point ttl_end = std::chrono::steady_clock::time_point::max();
    std::chrono::steady_clock::time_point idle_since;
    std::uint64_t memory_limit = 0;
    std::uint64_t rss = 0;                    // the last reading
    std::uint64_t rss_base = 0, rss_jobs = 0; // the reading growth is measured from, and its jobs
    std::uint64_t memory_check_jobs = ~0ull;

    // The request in progress, for the supervisor (exec_ttl, client_gone_ttl, the slow-request warning, a
    // reset's reset_timeout) and its log lines.
    struct Exec {
        const relay::RequestContext *ctx = nullptr; // null: none, or the supervisor is done with it
        int client = -1; // its client's socket (Client), asked whether the client is still there
        std::chrono::steady_clock::time_point started;
        bool warned = false;
        bool streaming = false; // its answer is out or streaming: exec_ttl no longer applies
        std::chrono::steady_clock::time_point
            client_left_at{}; // first tick that saw its client gone (epoch: not)

        // A request begins; `now`: the supervisor's tick (no clock read per request).
        void begin(const relay::RequestContext &c, int client_fd, std::chrono::steady_clock::time_point now)
        {
            ctx = &c;
            client = client_fd;
            started = now;
            warned = streaming = false;
            client_left_at = {};
        }
        // The supervisor has nothing more to watch in it (done, failed, or the worker is going).
        void clear()
        {
            ctx = nullptr;
            client = -1;
        }
    } exec;

    // The process's end, told by the reaper.
    bool exited = false;
    int wait_status = 0;
    Event exit_event;

    // A fork template (fork_template.hpp) instead of a worker: whether its handshake accepted the role, and
    // why not.
    bool is_template = false;
    bool template_ok = false;
    bool knows_templates = false; // its handshake answered "template" (Ferry's library, or prefork.php)
    std::string not_template;
    int control_fd = -1; // a template's control socket (its fd 3); closed with the Worker

    std::string tag() const { return (is_template ? "template " : "worker ") + std::to_string(pid); }
    bool broken() const { return channel->broken(); }

    // The reaper saw the process end: records how, ends what is left of its process group (a child it
    // started, exec('sleep 600 &')), wakes whoever waits for the exit.
    void on_exit(int status);
    // Signals the worker's process group (its children too); nothing once it has exited.
    void signal(int sig) const;
    // After the process exited: ends what is left of its process group.
    void kill_group() const;

private:
    bool refuse(State next) const; // logs the move the table does not have; false
    bool refuse(Recycle next) const;
    State state_ = State::spawning;
    Recycle recycle_ = Recycle::serving;
    Cause cause_ = Cause::none;
};

using WorkerPtr = std::shared_ptr<Worker>;
// Every live worker process, by pid.
using Registry = std::unordered_map<int, WorkerPtr>;

// The resident memory of a process in bytes (/proc/<pid>/statm); 0 when it cannot be read.
std::uint64_t read_rss(int pid);

// Waits for the process to exit, up to `limit`. True if it exited.
awaitable<bool> wait_exit(WorkerPtr w, std::chrono::milliseconds limit);

// Stops a worker: the stop frame, then up to `deadline` for it to exit; one still running then gets SIGTERM
// and, 2 s later, SIGKILL, each logged, unless the pool is stopping by then (its own deadline kills what is
// left and says so). `pool_stopping` keeps its owner alive.
awaitable<void> stop_worker(WorkerPtr w, std::chrono::steady_clock::time_point deadline,
                            std::shared_ptr<const Flag> pool_stopping);

} // namespace ferry::pool
