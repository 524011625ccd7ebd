#include "ferry/pool/pool.hpp"

#include "ferry/relay/frame.hpp"
#include "ferry/relay/log.hpp"
#include "ferry/version.hpp"
#include "spawn.hpp"
#include "worker.hpp"

#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <deque>
#include <random>
#include <sys/wait.h>
#include <unistd.h>
#include <unordered_map>

namespace ferry {

namespace pool {
namespace {

using clock = std::chrono::steady_clock;
constexpr std::string_view stop_request_payload = R"({"stop":true})";
constexpr std::size_t stderr_tail_max = 2048;

struct Waiter {
    explicit Waiter(asio::io_context &io) : timer(io) {}
    asio::steady_timer timer;
    WorkerPtr worker;
    std::string failure; // set when the pool gave up on this waiter (shutdown, boot failures)
};

constexpr auto recheck_client_after = std::chrono::milliseconds(10);
constexpr std::uint64_t quiet_check_every = 8;

} // namespace

struct Pool::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, Options o)
        : io(io_), opt(std::move(o)), sigchld(io_, SIGCHLD), state_changed(io_), rng(std::random_device{}())
    {
    }

    asio::io_context &io;
    Options opt;
    std::string exe;
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::unordered_map<int, WorkerPtr> workers; // every live process, by pid
    std::vector<WorkerPtr> idle;                // most recently used last
    std::deque<Waiter *> waiters;
    asio::signal_set sigchld;
    asio::steady_timer state_changed; // poked whenever a worker becomes ready / exits / fails to boot
    unsigned spawning = 0;            // spawn coroutines in progress, back-off included
    unsigned boot_failures = 0;       // consecutive
    std::string last_boot_error;
    bool shutting_down = false;
    clock::time_point stop_deadline = clock::time_point::max();
    std::uint64_t spawned_total = 0;
    std::uint64_t recycled_total = 0;
    std::uint64_t dropped_total = 0; // requests dropped because their client left while they waited
    asio::steady_timer supervisor_timer{io};
    clock::time_point coarse_now = clock::now(); // updated on every supervisor tick (exec start times)
    std::mt19937 rng;

    // ---- bookkeeping -------------------------------------------------------------------------

    // Workers that can take requests; retiring ones (past max_jobs) only when `with_retiring`.
    unsigned serving(bool with_retiring) const
    {
        unsigned n = 0;
        for (const auto &[pid, w] : workers)
            if ((w->state == State::ready || w->state == State::working) && (with_retiring || !w->retire))
                ++n;
        return n;
    }

    void poke() { state_changed.cancel(); }

    // Keeps num_workers workers serving or booting (retiring ones do not count).
    void maintain()
    {
        if (shutting_down)
            return;
        unsigned have = spawning + serving(false);
        for (unsigned i = have; i < opt.num_workers; ++i) {
            ++spawning;
            asio::co_spawn(io, spawn_worker(shared_from_this()), log_exceptions{"spawn worker"});
        }
    }

    std::uint64_t jittered_max_jobs()
    {
        if (opt.max_jobs == 0)
            return 0;
        // Up to +25 % so that workers started together do not all recycle together.
        std::uniform_int_distribution<std::uint64_t> d(0, opt.max_jobs / 4);
        return opt.max_jobs + d(rng);
    }

    void remove_idle(const WorkerPtr &w)
    {
        auto it = std::find(idle.begin(), idle.end(), w);
        if (it != idle.end())
            idle.erase(it);
    }

    void fail_waiters(const std::string &why)
    {
        while (!waiters.empty()) {
            Waiter *wt = waiters.front();
            waiters.pop_front();
            wt->failure = why;
            wt->timer.cancel();
        }
    }

    // A worker has nothing to do: stop it, hand it to a waiter, or park it.
    void make_available(const WorkerPtr &w)
    {
        if (w->state == State::dead || w->exited)
            return;
        if (w->stop_on_release || shutting_down) {
            start_stop(w);
            return;
        }
        w->state = State::ready;
        if (!waiters.empty()) {
            Waiter *wt = waiters.front();
            waiters.pop_front();
            wt->worker = w;
            w->state = State::working;
            wt->timer.cancel();
            return;
        }
        idle.push_back(w);
        w->watch(); // output while idle is caught as it arrives
    }

    // A new worker is ready: retire one worker that waits for its replacement.
    void retire_one()
    {
        for (auto &[pid, w] : workers) {
            if (!w->retire || w->stop_on_release || w->state == State::stopping || w->state == State::dead)
                continue;
            if (w->state == State::ready) {
                start_stop(w);
            } else {
                w->stop_on_release = true;
            }
            return;
        }
    }

    void release(const WorkerPtr &w)
    {
        w->exec_ctx = nullptr;
        ++w->jobs;
        if (w->max_jobs != 0 && w->jobs >= w->max_jobs && !w->retire) {
            w->retire = true;
            ++recycled_total;
            log::debug("pool", w->tag() + " reached max_jobs (" + std::to_string(w->jobs) + "), recycling");
            maintain(); // its replacement boots while it keeps serving
        }
        if (w->retire && w->jobs >= 2 * w->max_jobs) {
            start_stop(w); // no more overflow: requests wait for the replacement
            return;
        }
        make_available(w);
    }

    void start_stop(const WorkerPtr &w)
    {
        w->exec_ctx = nullptr;
        if (w->state == State::stopping || w->state == State::dead)
            return;
        remove_idle(w);
        w->state = State::stopping;
        asio::co_spawn(io, stop_worker(shared_from_this(), w), log_exceptions{"stop worker"});
        maintain();
    }

    // The worker broke mid-request or at boot: kill it now; the reaper replaces it.
    void kill_broken(const WorkerPtr &w)
    {
        w->exec_ctx = nullptr;
        remove_idle(w);
        if (w->state != State::dead)
            w->state = State::stopping;
        w->signal(SIGKILL);
        maintain();
    }

    // ---- processes ---------------------------------------------------------------------------

    static awaitable<void> reap(std::shared_ptr<Impl> self)
    {
        for (;;) {
            auto [ec, sig] = co_await self->sigchld.async_wait(nothrow);
            if (ec == asio::error::operation_aborted)
                co_return;
            for (;;) {
                int status = 0;
                pid_t pid = ::waitpid(-1, &status, WNOHANG);
                if (pid <= 0)
                    break;
                self->on_exit(pid, status);
            }
        }
    }

    void on_exit(int pid, int status)
    {
        auto it = workers.find(pid);
        if (it == workers.end())
            return;
        WorkerPtr w = it->second;
        workers.erase(it);
        bool expected = w->state == State::stopping || w->state == State::dead;
        std::string what = w->tag() + " " + describe_status(status);
        if (expected && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            log::debug("pool", what);
        } else if (expected) {
            log::info("pool", what);
        } else {
            log::warn("pool", what + " unexpectedly while " + state_name(w->state));
        }
        w->exited = true;
        w->wait_status = status;
        w->kill_group(); // what it started (exec('sleep 600 &')) ends with it
        remove_idle(w);
        // A working worker's request notices EOF on its stdout and answers 502 itself.
        if (w->state != State::working)
            w->state = State::dead;
        w->exit_timer.cancel();
        poke();
        maintain();
    }

    static awaitable<void> read_stderr(WorkerPtr w)
    {
        std::string pending;
        char buf[4096];
        const std::string prefix = "pid " + std::to_string(w->pid) + ": ";
        for (;;) {
            auto [ec, n] = co_await w->err.async_read_some(asio::buffer(buf), nothrow);
            if (ec)
                break;
            pending.append(buf, n);
            w->stderr_tail.append(buf, n);
            if (w->stderr_tail.size() > stderr_tail_max)
                w->stderr_tail.erase(0, w->stderr_tail.size() - stderr_tail_max);
            std::size_t start = 0;
            for (;;) {
                std::size_t nl = pending.find('\n', start);
                if (nl == std::string::npos)
                    break;
                std::string_view line(pending.data() + start, nl - start);
                if (!line.empty() && line.back() == '\r')
                    line.remove_suffix(1);
                log::info("worker", prefix + std::string(line));
                start = nl + 1;
            }
            pending.erase(0, start);
            if (pending.size() > 16 * 1024) {
                log::info("worker", prefix + pending);
                pending.clear();
            }
        }
        if (!pending.empty())
            log::info("worker", prefix + pending);
    }

    // Waits for the process to exit, up to `limit`. True if it exited.
    static awaitable<bool> wait_exit(WorkerPtr w, std::chrono::milliseconds limit)
    {
        if (w->exited)
            co_return true;
        w->exit_timer.expires_after(limit);
        co_await w->exit_timer.async_wait(nothrow);
        co_return w->exited;
    }

    static awaitable<void> spawn_worker(std::shared_ptr<Impl> self)
    {
        if (self->boot_failures > 0) {
            // Exponential back-off: a crash storm must not become a spawn storm.
            unsigned shift = std::min(self->boot_failures - 1, 7u);
            auto delay = std::chrono::milliseconds(100) * (1u << shift); // 100 ms .. 12.8 s
            auto until_t = clock::now() + delay;
            asio::steady_timer t(self->io);
            while (!self->shutting_down && clock::now() < until_t) { // a stop does not wait for the back-off
                t.expires_after(
                    std::min<clock::duration>(until_t - clock::now(), std::chrono::milliseconds(50)));
                co_await t.async_wait(nothrow);
            }
        }
        if (self->shutting_down) {
            --self->spawning;
            self->poke();
            co_return;
        }
        auto w = std::make_shared<Worker>(self->io, self->opt.max_frame_payload);
        try {
            w->pid = detail::spawn(self->exe, self->args, self->env, w->in, w->out, w->err);
        } catch (const std::exception &e) {
            --self->spawning;
            self->boot_failed(std::string(e.what()));
            co_return;
        }
        ++self->spawned_total;
        self->workers.emplace(w->pid, w);
        w->on_unexpected = [weak_self = std::weak_ptr<Impl>(self),
                            weak_w = std::weak_ptr<Worker>(w)](const std::string &what) {
            auto s = weak_self.lock();
            auto wp = weak_w.lock();
            if (s && wp)
                s->unexpected_output(wp, what);
        };
        w->start_reading();
        asio::co_spawn(self->io, read_stderr(w), log_exceptions{"worker stderr"});
        log::debug("pool", w->tag() + " spawned");

        std::string error = co_await self->handshake(w);
        --self->spawning;
        if (!error.empty() && self->shutting_down) {
            self->kill_broken(w); // stopped while booting: not a boot failure
            self->poke();
            co_return;
        }
        if (!error.empty()) {
            // Give the process a moment to exit by itself so the message can say how it ended (its own exit
            // code, not our SIGKILL) and what it printed; then make sure it is gone.
            if (w->state != State::dead)
                w->state = State::stopping;
            co_await wait_exit(w, std::chrono::milliseconds(200));
            self->kill_broken(w);
            co_await wait_exit(w, std::chrono::milliseconds(500));
            std::string msg = w->tag() + " failed to boot: " + error;
            if (w->exited)
                msg += " (" + describe_status(w->wait_status) + ")";
            std::string tail = w->stderr_tail;
            while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r'))
                tail.pop_back();
            if (!tail.empty())
                msg += "; its stderr: " + tail;
            self->boot_failed(msg);
            co_return;
        }
        self->boot_failures = 0;
        self->last_boot_error.clear();
        w->max_jobs = self->jittered_max_jobs();
        log::info("pool", w->tag() + " ready (" + (w->codec == relay::Codec::msgpack ? "msgpack" : "json") +
                              " context)");
        w->state = State::ready; // counted as serving before retire_one() asks maintain() for more
        self->retire_one();
        self->make_available(w);
        self->poke();
    }

    void boot_failed(const std::string &msg)
    {
        ++boot_failures;
        last_boot_error = msg;
        log::error("pool", msg);
        if (serving(true) == 0 && !waiters.empty())
            fail_waiters("no worker available: " + msg);
        poke();
        if (!shutting_down)
            maintain();
    }

    // PID handshake (protocol.md §2): returns "" on success, else why it failed.
    awaitable<std::string> handshake(WorkerPtr w)
    {
        w->begin_exchange();
        w->arm(opt.boot_timeout);
        std::string hello = relay::encode_frame(relay::flag::control | relay::flag::codec_json, 0, {},
                                                "{\"pid\":" + std::to_string(::getpid()) + "}");
        if (!co_await w->write_all(hello)) {
            w->disarm();
            co_return "it closed its stdin before the handshake";
        }
        relay::FrameHeader h;
        std::string_view payload;
        std::string err;
        bool ok = co_await w->next_frame(h, payload, err);
        w->disarm();
        if (!ok) {
            if (w->error_kind() == ChannelError::timed_out)
                co_return "no PID handshake within " + std::to_string(opt.boot_timeout.count()) + " ms";
            co_return err;
        }
        std::string reply(payload);
        std::string leftover;
        if (!w->end_exchange(leftover))
            co_return "it wrote more than the handshake reply: " + leftover;
        if (h.flags & relay::flag::error)
            co_return "it answered the handshake with an error: " + reply;
        if (!(h.flags & relay::flag::control))
            co_return "its first frame was not a control frame (flags " + std::to_string(h.flags) + ")";
        error_code ec;
        auto v = boost::json::parse(reply, ec);
        if (ec || !v.is_object() || !v.as_object().contains("pid"))
            co_return "bad PID handshake reply: \"" + relay::printable(reply) + "\"";
        const auto &obj = v.as_object();
        const auto &pidv = obj.at("pid");
        if (!pidv.is_int64() || pidv.as_int64() <= 0)
            co_return "bad PID handshake reply: \"" + relay::printable(reply) + "\"";
        if (auto c = obj.if_contains("codec"); c && c->is_string() && c->as_string() == "msgpack")
            w->codec = relay::Codec::msgpack;
        co_return "";
    }

    static awaitable<void> stop_worker(std::shared_ptr<Impl> self, WorkerPtr w)
    {
        static const std::string stop =
            relay::encode_frame(relay::flag::control | relay::flag::codec_json, 0, {}, stop_request_payload);
        auto deadline = std::min(clock::now() + self->opt.destroy_timeout, self->stop_deadline);
        if (!w->exited)
            co_await w->write_all(stop);
        if (co_await wait_exit(w, until(deadline)))
            co_return;
        if (self->shutting_down)
            co_return; // shutdown() kills what is left at its deadline and says so
        log::warn("pool", w->tag() + " did not stop within destroy_timeout, sending SIGTERM");
        w->signal(SIGTERM);
        if (co_await wait_exit(w, std::chrono::milliseconds(2000)))
            co_return;
        log::warn("pool", w->tag() + " ignored SIGTERM, sending SIGKILL");
        w->signal(SIGKILL);
        co_await wait_exit(w, std::chrono::milliseconds(5000));
    }

    static std::chrono::milliseconds until(clock::time_point t)
    {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - clock::now());
        return std::max(left, std::chrono::milliseconds(0));
    }

    // ---- allocation --------------------------------------------------------------------------

    awaitable<WorkerPtr> acquire(std::string &why, StreamSink *client)
    {
        if (shutting_down) {
            why = "server is shutting down";
            co_return nullptr;
        }
        while (!idle.empty()) {
            // Most recently used first (warm caches), but a worker past max_jobs only when no other is idle:
            // it serves only while its replacement boots.
            auto it = std::find_if(idle.rbegin(), idle.rend(), [](const WorkerPtr &c) { return !c->retire; });
            auto pick = it != idle.rend() ? std::prev(it.base()) : std::prev(idle.end());
            WorkerPtr w = std::move(*pick);
            idle.erase(pick);
            if (w->broken()) { // its stdout closed while idle: it is exiting
                kill_broken(w);
                continue;
            }
            w->state = State::working;
            co_return w;
        }
        if (serving(true) == 0 && boot_failures > 0) {
            why = "no worker available: " + last_boot_error;
            co_return nullptr;
        }
        Waiter wt(io);
        wt.timer.expires_after(opt.allocate_timeout); // queued at expiry() - allocate_timeout
        waiters.push_back(&wt);
        co_await wt.timer.async_wait(nothrow);
        if (wt.worker) {
            // A request that waited long may have lost its client meanwhile: one check (a system call) at
            // dispatch, only after a wait too long for a client to still be waiting without a reason (under
            // ordinary load requests wait far less and pay nothing). exec() checks the worker's broken().
            if (client && clock::now() - (wt.timer.expiry() - opt.allocate_timeout) >= recheck_client_after &&
                client->client_gone()) {
                WorkerPtr w = std::move(wt.worker);
                make_available(w); // to the next waiter
                ++dropped_total;
                why = "the client went away while its request waited for a worker";
                co_return nullptr;
            }
            co_return std::move(wt.worker);
        }
        auto it = std::find(waiters.begin(), waiters.end(), &wt);
        if (it != waiters.end())
            waiters.erase(it);
        why = !wt.failure.empty() ? wt.failure
                                  : "no free worker within allocate_timeout (" +
                                        std::to_string(opt.allocate_timeout.count()) + " ms)";
        co_return nullptr;
    }

    awaitable<Result> exec(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                           StreamSink *sink)
    {
        Result res;
        unsigned skipped_broken = 0;
        // A worker may ask to stop instead of answering: the same request goes to another worker.
        for (unsigned attempt = 0; attempt <= opt.num_workers + 1; ++attempt) {
            std::string why;
            auto dropped_before = dropped_total;
            WorkerPtr w = co_await acquire(why, sink);
            if (!w) {
                res.outcome = dropped_total != dropped_before ? Outcome::client_gone : Outcome::no_worker;
                res.message = why;
                co_return res;
            }
            if (w->broken()) {
                // It wrote more after its last reply (seen by the read that follows every reply, before this
                // request was written): retired, and this request goes to another worker.
                kill_broken(w);
                if (++skipped_broken <= 2 * opt.num_workers)
                    --attempt; // not the worker's refusal: does not count against the retry bound
                continue;
            }
            res.worker_pid = w->pid;
            w->wbuf.clear();
            relay::encode_request(ctx, w->codec, w->wbuf);
            std::uint8_t head[relay::max_header_size];
            std::uint32_t ctx_len = static_cast<std::uint32_t>(w->wbuf.size());
            std::size_t head_len = relay::encode_header(
                head, relay::codec_flag(w->codec), 0, static_cast<std::uint32_t>(w->wbuf.size() + body.size),
                std::span<const std::uint32_t>(&ctx_len, 1));
            std::array<asio::const_buffer, 3> bufs{asio::buffer(head, head_len), asio::buffer(w->wbuf),
                                                   asio::buffer(body.memory.data(), body.memory.size())};
            w->begin_exchange();
            w->exec_ctx = &ctx;
            w->exec_started = coarse_now; // the supervisor's own tick: no clock read per request
            w->exec_warned = false;
            error_code wec;
            if (body.fd < 0) {
                wec = co_await write_all_fast(w->in, bufs);
            } else {
                wec = co_await write_all_fast(w->in, std::span(bufs.data(), 2));
                if (!wec)
                    wec = co_await write_file(w->in, body.fd, body.size);
            }
            if (wec) {
                // The worker died before it could read the request (e.g. while idle, its exit not reaped
                // yet): nothing ran, so another worker gets it.
                log::warn("pool", w->tag() + ": writing the request failed (" + wec.message() +
                                      "); retrying on another worker");
                kill_broken(w);
                continue;
            }
            bool retry = false;
            co_await read_reply(w, res, body_out, sink, retry);
            if (!retry)
                co_return res;
        }
        res.outcome = Outcome::no_worker;
        res.message = "every worker asked to stop instead of answering";
        co_return res;
    }

    // Sends a request body spilled to a file: read in pieces, each written like any frame part.
    static awaitable<error_code> write_file(asio::writable_pipe &pipe, int fd, std::uint64_t size)
    {
        constexpr std::size_t piece = 256 * 1024;
        std::unique_ptr<char[]> buf(new char[piece]);
        for (std::uint64_t off = 0; off < size;) {
            std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(piece, size - off));
            ssize_t n = ::pread(fd, buf.get(), want, static_cast<off_t>(off));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                co_return error_code(n < 0 ? errno : EIO, boost::system::system_category());
            std::array<asio::const_buffer, 1> b{asio::buffer(buf.get(), static_cast<std::size_t>(n))};
            if (error_code ec = co_await write_all_fast(pipe, b))
                co_return ec;
            off += static_cast<std::uint64_t>(n);
        }
        co_return error_code{};
    }

    void crashed(const WorkerPtr &w, Result &res, const std::string &why)
    {
        res.outcome = Outcome::worker_crashed;
        res.message = w->tag() + ": " + why;
        log::error("pool", res.message);
        kill_broken(w);
    }

    // The supervisor failed the exchange (exec_ttl): the client gets its 504 before the worker is killed.
    void exec_timed_out(const WorkerPtr &w, Result &res, const std::string &why)
    {
        res.outcome = Outcome::timed_out;
        res.message = w->tag() + ": " + why;
        asio::post(io, [self = shared_from_this(), w] { self->kill_broken(w); });
    }

    // The last frame of a reply is handled: close the exchange and release the worker, or retire it when it
    // wrote more than one reply (those bytes go to nobody).
    void finish(const WorkerPtr &w)
    {
        std::string leftover;
        // A worker going idle is watched anyway (make_available); one handed straight to the next request is
        // checked for output after its reply only every quiet_check_every replies: the read costs a system
        // call per request, and a worker that writes twice is caught within that many replies.
        bool check = ++w->replies % quiet_check_every == 0;
        if (!w->end_exchange(leftover, check)) {
            log::error("pool", w->tag() + " wrote " + leftover + "; retiring it");
            kill_broken(w);
            return;
        }
        release(w);
    }

    // Output that no request asked for (see Worker::on_unexpected).
    void unexpected_output(const WorkerPtr &w, const std::string &what)
    {
        if (w->state == State::stopping || w->state == State::dead || shutting_down)
            return;
        log::error("pool", w->tag() + " wrote " + what + "; retiring it");
        kill_broken(w);
    }

    awaitable<void> read_reply(WorkerPtr w, Result &res, std::string &body_out, StreamSink *sink, bool &retry)
    {
        bool head_set = false;
        for (;;) {
            relay::FrameHeader h;
            std::string_view payload;
            std::string err;
            if (!co_await w->next_frame(h, payload, err)) {
                if (w->error_kind() == ChannelError::timed_out)
                    exec_timed_out(w, res, err);
                else
                    crashed(w, res, err);
                co_return;
            }
            if (h.flags & relay::flag::error) {
                res.outcome = Outcome::worker_error;
                res.message = std::string(payload);
                log::error("pool", w->tag() + " answered with an error: " + res.message);
                finish(w);
                co_return;
            }
            if (h.option_count != 1 || h.options[0] > h.payload_size) {
                res.outcome = Outcome::worker_error;
                res.message = w->tag() + ": protocol error: response frame with " +
                              std::to_string(h.option_count) + " option(s) and a " +
                              std::to_string(h.payload_size) +
                              "-byte payload (expected one option, the context length)";
                log::error("pool", res.message);
                kill_broken(w);
                co_return;
            }
            std::string_view ctx = payload.substr(0, h.options[0]);
            std::string_view body = payload.substr(h.options[0]);
            bool more = (h.stream & relay::stream::more) != 0;
            if (!more && !head_set && ctx == stop_request_payload && body.empty()) {
                log::debug("pool", w->tag() + " asked to stop; the request goes to another worker");
                ++recycled_total;
                std::string leftover;
                if (!w->end_exchange(leftover)) {
                    log::error("pool", w->tag() + " wrote " + leftover + "; retiring it");
                    kill_broken(w);
                } else {
                    start_stop(w);
                }
                retry = true;
                co_return;
            }
            if (!head_set) {
                relay::ResponseContext rc;
                if (auto decoded = relay::decode_response(ctx, w->codec, rc); !decoded) {
                    res.outcome = Outcome::worker_error;
                    res.message = w->tag() + ": bad response context: " + decoded.error().message;
                    log::error("pool", res.message);
                    if (more)
                        kill_broken(w); // the rest of its stream would be read as the next reply
                    else
                        finish(w);
                    co_return;
                }
                if (more && rc.status >= 100 && rc.status < 200 && rc.status != 101 && body.empty()) {
                    w->consume_frame(); // 1xx (103 Early Hints), then the real response (protocol.md §4)
                    if (sink && !co_await sink->on_informational(rc)) {
                        co_await cancel_stream(w, res);
                        co_return;
                    }
                    continue;
                }
                res.response = std::move(rc);
                head_set = true;
                if (!more) { // the whole response in one frame: the common case
                    res.outcome = Outcome::ok;
                    if (body.size() <= opt.copy_body_max || !sink) {
                        body_out.assign(body.data(), body.size());
                    } else if (opt.budget && res.body_reservation.grow(*opt.budget, body.size())) {
                        // Handed over without a copy: the worker goes on with a fresh buffer.
                        std::size_t payload_at = 0;
                        res.body_frame = w->take_frame(payload_at);
                        if (res.body_frame.data) {
                            res.body_offset =
                                static_cast<std::size_t>(body.data() - res.body_frame.data.get());
                            res.body_size = body.size();
                        } else { // the buffer holds more than this frame: copy after all
                            res.body_reservation.reset();
                            body_out.assign(body.data(), body.size());
                        }
                    } else {
                        // Over the body budget: the client gets it from the worker's buffer while it waits.
                        res.written = true;
                        if (!co_await sink->write_whole(res.response, body))
                            res.outcome = Outcome::cancelled;
                    }
                    finish(w);
                    co_return;
                }
                res.streamed = sink != nullptr;
            }
            bool keep_going = true;
            if (sink) {
                keep_going = co_await sink->on_chunk(res.response, body, !more);
            } else {
                body_out.append(body.data(), body.size());
            }
            if (!more) {
                res.outcome = Outcome::ok;
                finish(w);
                co_return;
            }
            w->consume_frame();
            if (!keep_going) {
                // STOP answers a pending PING too: the worker reads exactly one frame per PING.
                co_await cancel_stream(w, res);
                co_return;
            }
            if (h.stream & relay::stream::ping) {
                static const std::string pong = relay::encode_frame(0, relay::stream::pong, {}, {});
                if (!co_await w->write_all(pong)) {
                    crashed(w, res, "writing PONG failed");
                    co_return;
                }
            }
        }
    }

    // The client is gone mid-stream: send STOP and drain until the final frame (protocol.md §4).
    awaitable<void> cancel_stream(WorkerPtr w, Result &res)
    {
        res.outcome = Outcome::cancelled;
        res.message = "client went away during a streamed response";
        static const std::string stop = relay::encode_frame(0, relay::stream::stop, {}, {});
        if (!co_await w->write_all(stop)) {
            kill_broken(w);
            co_return;
        }
        w->arm(opt.destroy_timeout);
        for (;;) {
            relay::FrameHeader h;
            std::string_view payload;
            std::string err;
            if (!co_await w->next_frame(h, payload, err)) {
                w->disarm();
                log::warn("pool", w->tag() + " did not end its stream after STOP: " + err);
                kill_broken(w);
                co_return;
            }
            // No PONG after STOP: the worker takes STOP as the answer to its next PING and ends the stream.
            if (!(h.stream & relay::stream::more)) {
                w->disarm();
                finish(w);
                co_return;
            }
            w->consume_frame();
        }
    }

    // ---- supervision -------------------------------------------------------------------------

    // One coarse ticker for every busy worker: the slow-request warning and exec_ttl. Nothing per request
    // but a clock read.
    static awaitable<void> supervise(std::shared_ptr<Impl> self)
    {
        using std::chrono::milliseconds;
        auto tick = milliseconds(1000);
        for (auto limit : {self->opt.exec_ttl, self->opt.exec_warn})
            if (limit.count() > 0)
                tick = std::min(tick, std::max(milliseconds(10), limit / 8));
        asio::steady_timer &t = self->supervisor_timer;
        while (!self->shutting_down) {
            t.expires_after(tick);
            co_await t.async_wait(nothrow);
            auto now = clock::now();
            self->coarse_now = now;
            std::vector<WorkerPtr> expired;
            for (auto &[pid, w] : self->workers) {
                if (w->state != State::working || !w->exec_ctx)
                    continue;
                // exec_started is the tick before the request began: one tick less is a lower bound of how
                // long it has run, so no request is cut early (late by at most two ticks, a quarter of the
                // limit).
                auto ran = std::chrono::duration_cast<milliseconds>(now - w->exec_started) - tick;
                if (self->opt.exec_ttl.count() > 0 && ran >= self->opt.exec_ttl) {
                    expired.push_back(w);
                } else if (self->opt.exec_warn.count() > 0 && ran >= self->opt.exec_warn && !w->exec_warned) {
                    w->exec_warned = true;
                    log::warn("pool", w->tag() + " has been running " + describe_request(*w->exec_ctx) +
                                          " for " + std::to_string(ran.count()) + " ms (over exec_warn)");
                }
            }
            for (auto &w : expired) {
                std::string why = "request ran longer than exec_ttl (" +
                                  std::to_string(self->opt.exec_ttl.count()) +
                                  " ms): " + describe_request(*w->exec_ctx);
                log::error("pool", w->tag() + ": " + why + "; answering 504 and killing the worker");
                w->exec_ctx = nullptr;
                w->expire(why);
            }
        }
    }

    static std::string describe_request(const relay::RequestContext &c)
    {
        return c.method + " " + relay::printable(c.uri, 200);
    }

    awaitable<std::string> start()
    {
        exe = detail::find_executable(opt.command.empty() ? std::string() : opt.command[0]);
        if (exe.empty())
            co_return "server.command: \"" + (opt.command.empty() ? std::string() : opt.command[0]) +
                "\" not found in PATH";
        args.assign(opt.command.begin() + 1, opt.command.end());
        std::vector<std::string> extra = {"RR_RELAY=pipes", "RR_MODE=" + opt.mode, "RR_VERSION=2023.3.0",
                                          std::string("FERRY_VERSION=") + ferry::version};
        extra.insert(extra.end(), opt.env.begin(), opt.env.end());
        env = detail::build_environment(extra);
        asio::co_spawn(io, reap(shared_from_this()), log_exceptions{"reaper"});
        asio::co_spawn(io, supervise(shared_from_this()), log_exceptions{"supervisor"});
        maintain();
        for (;;) {
            if (shutting_down)
                co_return "stopped while starting";
            if (serving(true) >= opt.num_workers)
                co_return "";
            if (boot_failures > 0)
                co_return last_boot_error;
            state_changed.expires_after(std::chrono::seconds(1));
            co_await state_changed.async_wait(nothrow);
        }
    }

    // Stops every worker by `deadline`: idle ones get the stop frame now, busy ones when their request is
    // done; whatever still runs at the deadline is killed, with a log line each.
    awaitable<void> shutdown(clock::time_point deadline)
    {
        shutting_down = true;
        stop_deadline = deadline;
        fail_waiters("server is shutting down");
        std::vector<WorkerPtr> all;
        for (auto &[pid, w] : workers)
            all.push_back(w);
        for (auto &w : all) {
            if (w->state == State::ready)
                start_stop(w);
            else if (w->state == State::working)
                w->stop_on_release = true;
            else if (w->state == State::spawning)
                w->signal(SIGTERM);
        }
        while ((!workers.empty() || spawning > 0) && clock::now() < deadline) {
            state_changed.expires_after(std::chrono::milliseconds(20));
            co_await state_changed.async_wait(nothrow);
        }
        auto budget = std::to_string(opt.destroy_timeout.count());
        for (auto &[pid, w] : workers) {
            log::warn("pool", w->tag() + " still " + state_name(w->state) +
                                  " at the stop deadline (destroy_timeout " + budget + " ms): killing it");
            w->signal(SIGKILL);
        }
        auto reap_by = clock::now() + std::chrono::seconds(1);
        while (!workers.empty() && clock::now() < reap_by) {
            state_changed.expires_after(std::chrono::milliseconds(10));
            co_await state_changed.async_wait(nothrow);
        }
        error_code ignored;
        sigchld.cancel(ignored);
        supervisor_timer.cancel();
        if (dropped_total > 0)
            log::info("pool",
                      std::to_string(dropped_total) +
                          " queued request(s) were not executed: their client left while they waited");
    }

    void kill_all(const std::string &why)
    {
        shutting_down = true;
        for (auto &[pid, w] : workers) {
            log::warn("pool", w->tag() + ": " + why + ", killing it");
            w->signal(SIGKILL);
        }
    }
};

Pool::Pool(asio::io_context &io, Options options) : impl_(std::make_shared<Impl>(io, std::move(options))) {}

void Pool::abandon()
{
    for (auto &[pid, w] : impl_->workers)
        w->abandon();
}

Pool::~Pool()
{
    abandon();
    // Whatever is still alive dies with us (the children also have PR_SET_PDEATHSIG).
    for (auto &[pid, w] : impl_->workers)
        w->signal(SIGKILL);
}

awaitable<std::string> Pool::start()
{
    return impl_->start();
}

awaitable<Result> Pool::exec(const relay::RequestContext &ctx, BodyRef body, std::string &body_out,
                             StreamSink *sink)
{
    return impl_->exec(ctx, body, body_out, sink);
}

awaitable<void> Pool::shutdown(std::chrono::steady_clock::time_point deadline)
{
    return impl_->shutdown(deadline);
}

awaitable<void> Pool::shutdown()
{
    return impl_->shutdown(std::chrono::steady_clock::now() + impl_->opt.destroy_timeout);
}

void Pool::kill_all(const std::string &why)
{
    impl_->kill_all(why);
}

std::vector<WorkerInfo> Pool::workers() const
{
    std::vector<WorkerInfo> out;
    for (const auto &[pid, w] : impl_->workers)
        out.push_back(WorkerInfo{pid, state_name(w->state), w->jobs, w->created});
    std::sort(out.begin(), out.end(), [](const auto &a, const auto &b) { return a.pid < b.pid; });
    return out;
}

unsigned Pool::serving_workers() const
{
    return impl_->serving(true);
}

std::uint64_t Pool::spawned_total() const
{
    return impl_->spawned_total;
}
std::uint64_t Pool::recycled_total() const
{
    return impl_->recycled_total;
}
std::uint64_t Pool::dropped_total() const
{
    return impl_->dropped_total;
}

} // namespace pool
} // namespace ferry
