// One worker process (internal to pool/): its pid and state, its frame channel (ferry/relay/channel.hpp) and
// stderr, the signals it gets, the jobs it did, and how it is stopped.
#pragma once

#include "condition.hpp"
#include "ferry/base/io.hpp"
#include "ferry/pool/stats.hpp"
#include "ferry/relay/channel.hpp"
#include "ferry/relay/context.hpp"

#include <boost/asio/readable_pipe.hpp>

#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
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

// A worker's fields are private: each changes by a named operation that says what happened (its launch, its
// handshake's answers, a request beginning, a reset's deadline...), or is const. The supervisor's soft-limit
// bookkeeping (Limits) is written by Supervisor alone.
class Worker {
public:
    using clock = std::chrono::steady_clock;

    // `control_fd` ≥ 0: a fork template (fork_template.hpp) and its control socket (its fd 3), closed with
    // the Worker.
    Worker(asio::io_context &io, std::uint32_t max_payload, int control_fd = -1);
    ~Worker();
    Worker(const Worker &) = delete;
    Worker &operator=(const Worker &) = delete;

    // A fork template (fork_template.hpp) instead of a worker.
    const bool is_template;
    const std::chrono::system_clock::time_point created = std::chrono::system_clock::now();

    // Its process was started: its pid, and the event loop whose shard owns it (its pipes are that loop's).
    // Once per Worker (every spawner path: Shard::launch, Shard::launch_worker's fork, Spawner::launch,
    // Spawner::launch_template).
    void launched(int pid, unsigned home)
    {
        assert(pid_ == 0 && pid > 0);
        pid_ = pid;
        home_ = home;
    }
    int pid() const { return pid_; } // 0 until launched
    unsigned home() const { return home_; }

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

    relay::Channel &channel() { return *channel_; } // stdin and stdout: frames only
    asio::readable_pipe &err() { return err_; }     // the worker's log
    std::string &wbuf() { return wbuf_; }           // the request context being encoded (WorkerExchange)

    // Its handshake's answers (Spawner::handshake): the context codec it speaks; asked to be the fork
    // template, whether it accepted the role (`ok`), whether it answered about templates at all (`knows`:
    // Ferry's library, or prefork.php) and why not.
    void speaks(relay::Codec c) { codec_ = c; }
    void answered_template(bool ok, bool knows, std::string why_not)
    {
        template_ok_ = ok;
        knows_templates_ = knows;
        not_template_ = std::move(why_not);
    }
    relay::Codec codec() const { return codec_; }
    bool template_ok() const { return template_ok_; }
    bool knows_templates() const { return knows_templates_; }
    const std::string &not_template() const { return not_template_; }

    // A template's control socket (its fd 3); -1 once closed (close_control: EOF on it, the template exits).
    int control_fd() const { return control_fd_; }
    void close_control();

    // The last bytes of its stderr, for boot error messages: keep_stderr() appends what was read and keeps
    // the last 2 KiB (forward_stderr).
    const std::string &stderr_tail() const { return stderr_tail_; }
    void keep_stderr(std::string_view bytes)
    {
        stderr_tail_.append(bytes);
        if (stderr_tail_.size() > stderr_tail_max)
            stderr_tail_.erase(0, stderr_tail_.size() - stderr_tail_max);
    }

    // When its boot began, which its ttl counts from too: its construction, or for a forked worker its fork
    // (forked_at: ForkTemplate::Forked::sent, set once by Shard::launch_worker).
    clock::time_point started() const { return started_; }
    void forked_at(clock::time_point sent) { started_ = sent; }

    // Booting under SCHED_IDLE (Options::recycle_priority) until restored.
    bool idle_boot() const { return idle_boot_; }
    void boots_idle() { idle_boot_ = true; }
    void priority_restored() { idle_boot_ = false; }

    // The CPU it is pinned to (Options::cpu_affinity), -1: not pinned.
    int cpu() const { return cpu_; }
    void pinned_to(int cpu) { cpu_ = cpu; }

    // Jobs and recycling (the supervisor's): the jobs it did, and its max_jobs with jitter (0 = unlimited).
    std::uint64_t jobs() const { return limits_.jobs; }
    std::uint64_t max_jobs() const { return limits_.max_jobs; }

    // Rolling reset: the pool's generation when this worker was started (a reset makes older ones stale), set
    // once at its spawn (spawned_in); the time a stale busy worker must be done by (reset_timeout); and
    // whether it was killed for it (reset_timed_out: the supervisor fails its request, the pool kills it).
    std::uint64_t generation() const { return gen_; }
    void spawned_in(std::uint64_t gen)
    {
        assert(gen_ == 0);
        gen_ = gen;
    }
    clock::time_point reset_deadline() const { return reset_deadline_; }
    void must_stop_by(clock::time_point deadline) { reset_deadline_ = deadline; }
    bool killed_by_reset() const { return reset_killed_; }
    void reset_timed_out() { reset_killed_ = true; }

    // The request in progress, for the supervisor (exec_ttl, client_gone_ttl, the slow-request warning, a
    // reset's reset_timeout) and its log lines. Begun and written to by the dispatch and the exchange.
    class Exec {
    public:
        // A request begins; `now`: the supervisor's tick (no clock read per request).
        void begin(const relay::RequestContext &c, int client_fd, clock::time_point now)
        {
            ctx_ = &c;
            client_ = client_fd;
            started_ = now;
            warned_ = streaming_ = false;
            client_left_at_ = {};
        }
        // The supervisor has nothing more to watch in it (done, failed, or the worker is going).
        void clear()
        {
            ctx_ = nullptr;
            client_ = -1;
        }
        // The caller is done with its client: the descriptor may be closed and reused from now on, so the
        // supervisor asks it nothing more (client_gone_ttl).
        void forget_client() { client_ = -1; }
        // Its answer is out or streaming: exec_ttl no longer applies.
        void streaming_started() { streaming_ = true; }
        // The slow-request warning (exec_warn) was logged: once per request.
        void warned_slow() { warned_ = true; }
        // A tick saw its client gone; the first such tick is kept.
        void client_left(clock::time_point now)
        {
            if (client_left_at_ == clock::time_point{})
                client_left_at_ = now;
        }

        const relay::RequestContext *ctx() const { return ctx_; }
        int client() const { return client_; }
        clock::time_point started() const { return started_; }
        bool warned() const { return warned_; }
        bool streaming() const { return streaming_; }
        clock::time_point client_left_at() const { return client_left_at_; }

    private:
        const relay::RequestContext *ctx_ = nullptr; // null: none, or the supervisor is done with it
        int client_ = -1; // its client's socket (Client), asked whether the client is still there
        clock::time_point started_;
        bool warned_ = false;
        bool streaming_ = false;           // its answer is out or streaming: exec_ttl no longer applies
        clock::time_point client_left_at_; // first tick that saw its client gone (epoch: not)
    };
    Exec &exec() { return exec_; }

    // The process's end, told by the reaper (on_exit): whether it exited, its wait status, and the event
    // that wakes whoever waits for it (wait_exit).
    bool exited() const { return exited_; }
    int wait_status() const { return wait_status_; }
    Condition &exit_event() { return exit_event_; }

    std::string tag() const { return (is_template ? "template " : "worker ") + std::to_string(pid_); }
    bool broken() const { return channel_->broken(); }

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

    // Jobs, recycling and the soft limits, jittered per worker. Supervisor (supervisor.cpp) alone writes
    // them; the others read jobs() and max_jobs().
    struct Limits {
        std::uint64_t jobs = 0;
        std::uint64_t max_jobs = 0; // with jitter; 0 = unlimited
        // Starting that replacement early: the next job count at which the request rate is measured, and the
        // job count and time of the last measurement (Supervisor::starts_early).
        std::uint64_t rate_check_jobs = ~0ull;
        std::uint64_t rate_base_jobs = 0;
        clock::time_point rate_base_at;
        // Soft limits: when its ttl ends, its memory limit, when its last request ended (idle_ttl); memory is
        // also sampled after requests, when `memory_check_jobs` is reached (set from the growth between the
        // last two readings).
        clock::time_point ttl_end = clock::time_point::max();
        clock::time_point idle_since;
        std::uint64_t memory_limit = 0;
        std::uint64_t rss = 0;                    // the last reading
        std::uint64_t rss_base = 0, rss_jobs = 0; // the reading growth is measured from, and its jobs
        std::uint64_t memory_check_jobs = ~0ull;
    };
    friend class Supervisor;          // the supervisor alone writes limits_
    friend struct SupervisorTestHook; // tests/unit/pool/supervisor_test.cpp: reads them, lowers a limit

    static constexpr std::size_t stderr_tail_max = 2048;

    int pid_ = 0;
    unsigned home_ = 0;
    State state_ = State::spawning;
    Recycle recycle_ = Recycle::serving;
    Cause cause_ = Cause::none;
    const std::shared_ptr<relay::Channel> channel_;
    asio::readable_pipe err_;
    std::string wbuf_;
    relay::Codec codec_ = relay::Codec::json;
    bool template_ok_ = false;
    bool knows_templates_ = false;
    std::string not_template_;
    int control_fd_;
    std::string stderr_tail_;
    clock::time_point started_ = clock::now();
    bool idle_boot_ = false;
    int cpu_ = -1;
    Limits limits_;
    std::uint64_t gen_ = 0;
    clock::time_point reset_deadline_ = clock::time_point::max();
    bool reset_killed_ = false;
    Exec exec_;
    bool exited_ = false;
    int wait_status_ = 0;
    Condition exit_event_;
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
