// A supervised pool of long-running PHP worker processes (docs/architecture.md, "Workers"; docs/protocol.md
// §2). Inside pool/src: worker (one process), spawner (start, back-off, handshake), reaper (exits, stderr),
// allocator (idle set, waiters), exchange (one request on one worker), supervisor (max_jobs, exec_ttl), and
// one Shard per loop (shard.hpp, split by role) joined by Pool::Impl (group.hpp) with the lifecycle; what the
// process has once (its children, its CPUs) is the Host (host.hpp). A worker's frame channel is relay's
// (ferry/relay/channel.hpp).
#pragma once

#include "ferry/base/budget.hpp"
#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/pool/host.hpp"
#include "ferry/pool/stats.hpp"
#include "ferry/relay/context.hpp"
#include "ferry/relay/form.hpp"
#include "ferry/relay/frame.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::pool {

// The config's words as the pool takes them (ferry/conf/config.hpp): Options::recycle_priority, fork,
// cpu_affinity.
using conf::CpuAffinity;
using conf::Fork;
using conf::RecyclePriority;

struct Options {
    std::vector<std::string> command; // argv[0] is looked up in PATH
    std::vector<std::string> env;     // "K=V" entries added to the server's environment
    std::string mode = "http";        // RR_MODE
    unsigned num_workers = 1;
    std::uint64_t max_jobs = 0; // 0 = unlimited
    // Fork new workers from a template instead of starting PHP for each (docs/protocol.md §8): app = one
    // that booted the app once, or, for a worker that is not Ferry's library, a PHP-level template (PHP
    // started, no script run; §8.1); php = always a PHP-level one. A PHP-level template needs a command that
    // starts php itself. Where there can be no template, workers are started as usual (logged).
    Fork fork = Fork::off;
    // Forked workers asked to end with _exit(0) once stopped, after PHP's request shutdown (the fork
    // command's "fast_exit", docs/protocol.md §8): the engine's teardown in a fork copies the template's
    // heap.
    bool fork_fast_exit = true;
    // idle: a replacement for a worker that still serves (max_jobs, ttl, memory; not a reset, which someone
    // waits for) runs under SCHED_IDLE from its exec to its handshake (or until idle_boot_limit, then it is
    // raised to normal), and a worker retired that way exits under SCHED_IDLE. A first boot or a crash's
    // replacement, which requests wait for, boots at normal priority.
    RecyclePriority recycle_priority = RecyclePriority::automatic;
    // automatic: a worker is pinned to one CPU once its boot is done (the boot runs wherever there is spare
    // CPU), spread evenly over the CPUs the server may run on; a replacement takes the CPU of the worker it
    // replaces. The front end's loops are not pinned. With workers pinned, recycle_priority's automatic is
    // normal (pool/src/affinity.hpp; docs/tuning.md, "max_jobs, fork, recycle_priority").
    CpuAffinity cpu_affinity = CpuAffinity::automatic;
    // With workers pinned and several loops, each loop's thread goes beside its own workers (the HTTP pool's
    // choice: its loops are the front end's; docs/tuning.md).
    bool pins_loops = false;
    std::chrono::milliseconds idle_boot_limit{1000};
    std::chrono::milliseconds allocate_timeout{60000};
    // Requests waiting for a worker (all loops together) beyond which a new one is answered 503 at once
    // (0 = no limit).
    std::uint64_t max_queue_size = 0;
    std::chrono::milliseconds destroy_timeout{60000};
    std::chrono::milliseconds boot_timeout{60000}; // PID handshake must finish within this
    // A rolling reset waits this long for a busy old worker, then kills it (its request gets 503).
    std::chrono::milliseconds reset_timeout{60000};
    unsigned max_recycling = 1;                 // workers of a loop being replaced at once by a rolling reset
    std::uint32_t max_frame_payload = 1u << 30; // largest response frame accepted (1 GiB)
    // A request running longer gets 504, its worker killed (0 = off). A streamed response is timed until its
    // head (the stream itself goes on while its client reads; a client that leaves stops it).
    std::chrono::milliseconds exec_ttl{60000};
    // A request whose client has left (reset or closed, seen by the supervisor's tick) may run this much
    // longer; then its worker is killed and replaced (0 = until exec_ttl). A stream that still sends is
    // stopped before (its next write fails: STOP); one that sends nothing more ends here.
    std::chrono::milliseconds client_gone_ttl{10000};
    std::chrono::milliseconds exec_warn{30000}; // a request running longer is logged once (0 = off)
    // Soft limits (pool/src/supervisor.hpp): a worker past one is replaced, its replacement first, a busy one
    // after its request; at most max_recycling workers of a loop are being replaced at once. Checked every
    // watch_tick (memory also after requests, as often as the worker's growth calls for).
    std::chrono::milliseconds watch_tick{1000};
    std::chrono::milliseconds ttl{0};      // lifetime, jittered up to 10 % shorter per worker (0 = unlimited)
    std::chrono::milliseconds idle_ttl{0}; // idle this long after its first request (0 = unlimited)
    std::uint64_t max_worker_memory = 0;   // RSS in bytes, jittered up to 10 % lower per worker (0 = off)
    // A fresh worker for every request (development): started when a request comes, stopped after it.
    bool debug = false;
    // Response bodies larger than this are handed to the connection without a copy (when `budget` allows).
    std::size_t copy_body_max = 64 * 1024;
    // A response head (status and headers, as the worker encoded them) larger than this, or with more header
    // lines, is not relayed: 502 and a log line (nginx: "upstream sent too big header").
    std::size_t max_response_head = 64 * 1024;
    std::size_t max_response_headers = 1000;
    Budget *budget = nullptr; // body memory in flight, shared with the server's request bodies
};

enum class Outcome {
    ok,             // `response` is the head; the body follows (Reply::body(), Reply::next())
    worker_error,   // the worker sent an ERROR frame: answer the configured internal error code
    worker_crashed, // the worker died or broke the protocol mid-request: 502
    no_worker,      // no worker within allocate_timeout, or the pool is shutting down / unhealthy: 503
    timed_out,      // the request ran longer than exec_ttl: 504, the worker is killed
    client_gone,    // the client's connection failed while the request waited for a worker: not executed
    bad_response,   // the worker's response cannot be relayed (its head is over the limits): 502, logged
};

// A frame's bytes in a heap block that can change owner without a copy.
using relay::FrameBuffer;

// A request body for exec(): in memory, or in a file (a large body spilled to disk), read from offset 0.
struct BodyRef {
    std::string_view memory; // when fd < 0
    int fd = -1;
    std::uint64_t size = 0;
    // A form the server parsed: sent instead, encoded in the worker's codec (the context says parsed).
    const relay::FormTree *form = nullptr;
};

// The client a request is for, as the pool may ask about it (never write to it): its connected socket,
// polled with ferry/base/peer.hpp from whichever loop runs the request. A request that waited long for a
// worker is dropped when its client reset the connection; one whose client left is ended after
// client_gone_ttl. fd -1: nobody to ask.
struct Client {
    int fd = -1;
};

struct Shard; // pool/src/shard.hpp
class Worker; // pool/src/worker.hpp

// The answer exec() gives, read by the caller as it writes it (h2o's generator is the model): the head first,
// then the body — whole, or a streamed response's chunks one next() at a time. The pool never calls the
// caller back; a reply that holds its worker (a stream, or a large body read straight from the worker's
// buffer) gives it back at finish(), and a stream left before its end is stopped there (STOP, drained by
// the pool). The caller owns the Reply and may keep it for its next request (its copy buffer is reused).
// Used on the loop that called exec(); a worker of another loop is read on its own loop by next().
class Reply {
public:
    Outcome outcome = Outcome::ok;
    std::string message;             // why, for logs and error bodies
    relay::ResponseContext response; // the head (outcome ok): informational (1xx) or the final one
    int worker_pid = 0;

    Reply() = default;
    Reply(Reply &&other) noexcept;
    Reply &operator=(Reply &&other) noexcept;
    ~Reply() { finish(); }

    // `response` is an informational head (1xx, e.g. 103 Early Hints): next() reads what follows it.
    bool informational() const { return informational_; }
    // The body, or the chunk of a streamed response just read: valid until next() or finish().
    std::string_view body() const { return body_; }
    // A streamed response has more chunks: next() reads the next one.
    bool more() const { return more_; }
    // The reply holds its worker until finish() (a stream, or a body read from the worker's own buffer: a
    // caller that may take long to write it copies it out first and finishes).
    bool holds_worker() const { return worker_ != nullptr; }
    // Reads the next head or chunk (after an informational head, or while more()). A failure mid-way sets
    // `outcome` and `message`; more() is then false.
    awaitable<void> next();
    // Done with the reply: its worker goes back to the pool (a stream not read to its end is stopped first);
    // the body's memory is given back. The Reply can be used again.
    void finish();
    // The whole body as one string, a stream's chunks joined and informational heads skipped (an answer
    // that is read, not relayed: a WebSocket event's actions); then finish(). A failure mid-way sets
    // `outcome`; so does a stream longer than one frame may be (Options::max_frame_payload: bad_response,
    // the stream stopped).
    awaitable<std::string> collect();
    // Gives back a copy buffer a large answer grew (an idle connection).
    void release_memory();

private:
    friend struct Shard;
    friend class WorkerExchange;

    // Ends the current request's state without touching a worker (finish() settled it).
    void clear_body();

    std::string copy_;               // a small body, copied (Options::copy_body_max)
    FrameBuffer frame_;              // a large body handed over without a copy, within Options::budget
    Reservation reservation_;        // frame_'s bytes against the budget
    std::string_view body_;          // into copy_, frame_ or the worker's read buffer
    std::shared_ptr<Worker> worker_; // held until finish()
    std::shared_ptr<Shard> shard_;   // the worker's
    bool foreign_ = false;           // the worker is another loop's: next() and finish() go there
    bool informational_ = false, more_ = false;
    bool presented_ = false;  // a head was given to the caller: what follows belongs to it (no retry)
    bool final_head_ = false; // the final head was read
    bool ended_ = false;      // the last frame was read: finish() releases the worker without STOP
    bool ping_ = false;       // the current frame asked for a PONG (sent when the caller asks for the next)
};

struct WorkerInfo {
    int pid = 0;
    std::string state; // spawning, ready, working, stopping
    std::uint64_t jobs = 0;
    std::chrono::system_clock::time_point created;
    unsigned loop = 0;         // the event loop whose shard owns it
    bool replacing = false;    // it waits for its replacement (max_jobs, a reset)
    Cause cause = Cause::none; // why it is being replaced, once it is
    std::uint64_t rss = 0;     // resident memory in bytes (/proc), 0 when unknown
    int cpu = -1;              // the CPU it is pinned to (Options::cpu_affinity), -1 when not pinned
};

// What a rolling reset did.
struct ResetReport {
    unsigned replaced = 0; // old workers retired
    unsigned killed = 0;   // busy beyond reset_timeout
};

// With several event loops (docs/architecture.md, "Several loops") the pool is one shard per loop: each loop
// owns num_workers / loops of the workers (their pipes are its I/O) and serves its requests on them without a
// lock. A loop without an idle worker runs the request on an idle worker of another loop (on that loop, the
// response coming back), and a worker that goes idle serves another loop's oldest waiting request when this
// loop has none waiting (or has waited clearly less): no request waits while a worker is idle anywhere.
class Pool {
public:
    // `host`: the process's (ferry/pool/host.hpp), the same for every pool of the process — each pool's
    // reaper reaps any child and routes it through the host's table; the pool keeps it alive.
    Pool(std::shared_ptr<Host> host, asio::io_context &io, Options options);
    // One shard per loop; loops[0] also runs the reaper. start(), shutdown() and kill_all() are called on
    // loops[0]; exec() on the loop whose index it is given.
    Pool(std::shared_ptr<Host> host, const std::vector<asio::io_context *> &loops, Options options);
    ~Pool();
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;

    // Spawns the workers and waits until all are ready, or one boot failed (the error is its message), or
    // the command is missing, or a stop began. The pool keeps retrying with back-off after a boot failure.
    awaitable<Result<void>> start();

    // Runs one request on a worker: allocate, send the frame, read the reply's first head into `reply` (its
    // earlier request's state finished first). Retries on another worker when a worker asks to stop instead
    // of answering. `loop`: the index of the calling thread's loop.
    awaitable<void> exec(const relay::RequestContext &ctx, BodyRef body, Reply &reply, Client client = {},
                         unsigned loop = 0);

    // Stops every worker by `deadline`: the stop frame to idle workers now and to busy ones when their
    // request is done; SIGKILL (logged per worker) for whatever still runs at the deadline.
    awaitable<void> shutdown(std::chrono::steady_clock::time_point deadline);
    awaitable<void> shutdown(); // deadline: destroy_timeout from now
    // Second signal: SIGKILL every worker now, each logged with `why`.
    void kill_all(const std::string &why);

    // Rolling reset (docs/architecture.md, "Rolling reset"): every worker (and the fork template) is replaced
    // by a fresh one, max_recycling at a time on each loop. A new worker passes its handshake before an old
    // one is retired; an old one finishes its request first (reset_timeout, then it is killed: 503). Requests
    // keep being served by whichever worker is ready. Done when no old worker is left; an error when new
    // workers cannot boot (the old ones keep serving; the boot error is logged once). Resets that overlap
    // coalesce: the later one replaces whatever the earlier one has not. It clears the boot back-off. On
    // loops[0].
    awaitable<Result<ResetReport>> reset(std::string why);
    // The workers of every loop, read on their own loops; `memory`: with each one's RSS (a /proc read per
    // worker, which /ready does not need). On loops[0].
    awaitable<std::vector<WorkerInfo>> snapshot(bool memory = false);
    // After an event loop was stopped with tasks left in it (the server's fallback, which warns: a stop
    // normally ends every request first): destroys the requests still suspended on a worker (each holds its
    // worker, which holds it). Call while what their frames refer to still exists.
    void abandon();

    // The worker list and the totals below read every loop's state: call them from loops[0] when it is the
    // only loop, or when the loops are stopped. serving_workers() is safe from any thread.
    std::vector<WorkerInfo> workers() const;
    unsigned serving_workers() const; // ready or working
    std::uint64_t spawned_total() const;
    std::uint64_t recycled_total() const;
    std::uint64_t dropped_total() const; // requests not executed: their client left while they waited
    // Requests that queued for a worker (none was idle on any loop).
    std::uint64_t waited_total() const;
    // Workers one loop lent to another (a request ran on another loop's worker).
    std::uint64_t lent_total() const;
    // Counts and histograms of every loop (their atomics), and the queue now; on loops[0].
    PoolStats stats() const;

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::pool
