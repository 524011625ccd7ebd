// The pool with several event loops (one shard per loop, each loop on its own thread): no request waits while
// a worker is idle on any loop, a reply is read on the caller's loop, recycling and shutdown work.
#include "pool_test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <set>
#include <thread>
#include <vector>

using namespace ferry;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using pool_test::host;
using pool_test::options;
using pool_test::request;

namespace {

// `n` loops: loop 0 runs the test's coroutine on this thread, the others run on their own threads until the
// coroutine is done.
class Loops {
public:
    explicit Loops(unsigned n)
    {
        for (unsigned i = 0; i < n; ++i)
            loops_.push_back(std::make_unique<asio::io_context>());
        for (unsigned i = 1; i < n; ++i) {
            guards_.emplace_back(asio::make_work_guard(*loops_[i]));
            threads_.emplace_back([l = loops_[i].get()] { l->run(); });
        }
    }
    ~Loops() { stop(); }
    std::vector<asio::io_context *> contexts() const
    {
        std::vector<asio::io_context *> out;
        for (auto &l : loops_)
            out.push_back(l.get());
        return out;
    }
    asio::io_context &operator[](unsigned i) { return *loops_[i]; }
    std::thread::id thread_of(unsigned i) const
    {
        return i == 0 ? std::this_thread::get_id() : threads_[i - 1].get_id();
    }
    void stop()
    {
        for (auto &l : loops_)
            l->stop();
        for (auto &t : threads_)
            if (t.joinable())
                t.join();
    }

    template <typename F> void run(F body)
    {
        bool done = false;
        std::exception_ptr error;
        asio::co_spawn(*loops_[0], body(), [&](std::exception_ptr e) {
            done = true;
            error = e;
            loops_[0]->stop();
        });
        loops_[0]->run_for(60s);
        stop(); // before the pool goes: no loop thread runs while the test tears it down
        ASSERT_TRUE(done) << "coroutine did not finish in time";
        if (error)
            std::rethrow_exception(error);
    }

private:
    std::vector<std::unique_ptr<asio::io_context>> loops_;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
};

struct Exec {
    pool::Reply result;
    std::string body;
    std::chrono::milliseconds took{0};
};

// One request run from loop `loop` (the caller's coroutine waits on its own loop).
awaitable<Exec> exec_on(pool::Pool &p, Loops &loops, unsigned loop, std::string path)
{
    auto run = [](pool::Pool *pp, unsigned l, std::string pth) -> awaitable<Exec> {
        Exec e;
        auto ctx = request(pth);
        auto t0 = clock_type::now();
        co_await pp->exec(ctx, {}, e.result, {}, l);
        e.body = co_await e.result.collect();
        e.took = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0);
        co_return e;
    };
    co_return co_await asio::co_spawn(loops[loop], run(&p, loop, std::move(path)), use_awaitable);
}

// Starts a request from `loop` without waiting for it; its result lands in *out, `done` is raised.
void start_on(pool::Pool &p, Loops &loops, unsigned loop, std::string path, Exec *out,
              std::atomic<bool> *done)
{
    asio::co_spawn(loops[0], exec_on(p, loops, loop, std::move(path)),
                   [out, done](std::exception_ptr, Exec e) {
                       *out = std::move(e);
                       done->store(true);
                   });
}

awaitable<void> sleep_for(std::chrono::milliseconds d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(nothrow);
}

awaitable<void> wait_for(const std::atomic<bool> &done, std::chrono::milliseconds limit)
{
    auto until = clock_type::now() + limit;
    while (!done.load() && clock_type::now() < until)
        co_await sleep_for(5ms);
}

} // namespace

TEST(PoolLoops, WorkersAreSharedOutAndEachLoopUsesItsOwn)
{
    Loops loops(2);
    pool::Pool p(host(), loops.contexts(), options("echo.php", 2));
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        EXPECT_EQ(p.serving_workers(), 2u);
        auto a = co_await exec_on(p, loops, 0, "/status/200");
        auto b = co_await exec_on(p, loops, 1, "/status/200");
        EXPECT_EQ(a.result.outcome, pool::Outcome::ok);
        EXPECT_EQ(b.result.outcome, pool::Outcome::ok);
        EXPECT_NE(a.result.worker_pid, b.result.worker_pid) << "each loop has a worker of its own";
        EXPECT_EQ(p.lent_total(), 0u);
        co_await p.shutdown();
    });
    EXPECT_TRUE(p.workers().empty());
}

TEST(PoolLoops, NoRequestWaitsWhileAWorkerIsIdleOnAnotherLoop)
{
    Loops loops(2);
    pool::Pool p(host(), loops.contexts(), options("echo.php", 2));
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        // Loop 0's worker is blocked for 3 s; loop 1's is idle: loop 0's next request is answered at once.
        Exec blocked;
        std::atomic<bool> blocked_done{false};
        start_on(p, loops, 0, "/sleep?ms=3000", &blocked, &blocked_done);
        co_await sleep_for(200ms);
        auto quick = co_await exec_on(p, loops, 0, "/status/201");
        EXPECT_EQ(quick.result.outcome, pool::Outcome::ok) << quick.result.message;
        EXPECT_EQ(quick.result.response.status, 201);
        EXPECT_LT(quick.took, 1000ms) << "it waited for the blocked worker";
        EXPECT_FALSE(blocked_done.load());
        co_await wait_for(blocked_done, 10s);
        EXPECT_EQ(blocked.result.outcome, pool::Outcome::ok);
        EXPECT_NE(quick.result.worker_pid, blocked.result.worker_pid);
        co_await p.shutdown();
    });
}

TEST(PoolLoops, AWorkerFreedOnOneLoopServesTheRequestWaitingOnAnother)
{
    Loops loops(2);
    pool::Pool p(host(), loops.contexts(), options("echo.php", 2));
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        // Both workers busy: loop 0's for 4 s, loop 1's for 0.5 s. A request queued on loop 0 gets loop 1's
        // worker when it is free (lent), not loop 0's after 4 s.
        Exec long_one, short_one;
        std::atomic<bool> long_done{false}, short_done{false};
        start_on(p, loops, 0, "/sleep?ms=4000", &long_one, &long_done);
        co_await sleep_for(100ms);
        start_on(p, loops, 1, "/sleep?ms=500", &short_one, &short_done);
        co_await sleep_for(100ms);
        auto waited = co_await exec_on(p, loops, 0, "/status/202");
        EXPECT_EQ(waited.result.outcome, pool::Outcome::ok) << waited.result.message;
        EXPECT_EQ(waited.result.response.status, 202);
        EXPECT_LT(waited.took, 2000ms) << "it waited for its own loop's worker";
        EXPECT_TRUE(short_done.load());
        EXPECT_FALSE(long_done.load());
        EXPECT_EQ(waited.result.worker_pid, short_one.result.worker_pid);
        EXPECT_GE(p.lent_total(), 1u);
        co_await wait_for(long_done, 10s);
        co_await p.shutdown();
    });
}

TEST(PoolLoops, ALoopWithoutWorkersBorrowsThem)
{
    // One worker, three loops: loops 1 and 2 have none of their own.
    Loops loops(3);
    pool::Pool p(host(), loops.contexts(), options("echo.php", 1));
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        EXPECT_EQ(p.serving_workers(), 1u);
        std::vector<Exec> results(9);
        std::vector<std::atomic<bool>> done(9);
        for (unsigned i = 0; i < 9; ++i)
            start_on(p, loops, i % 3, "/sleep?ms=20", &results[i], &done[i]);
        for (auto &d : done)
            co_await wait_for(d, 10s);
        for (auto &r : results) {
            EXPECT_EQ(r.result.outcome, pool::Outcome::ok) << r.result.message;
            EXPECT_EQ(r.result.worker_pid, results[0].result.worker_pid);
        }
        co_await p.shutdown();
    });
}

// A stream from loop 0's worker pulled from loop 1: every piece comes back on the caller's loop (the reads
// run on the worker's), and finishing it gives the worker back to its own loop.
TEST(PoolLoops, AStreamFromAnotherLoopsWorkerIsReadOnTheCallersLoop)
{
    Loops loops(2);
    pool::Pool p(host(), loops.contexts(), options("stream.php", 1)); // the worker is loop 0's
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        struct Seen {
            std::set<std::thread::id> threads;
            std::vector<int> informational;
            std::string body;
            int status = 0, pid = 0;
            bool held_while_streaming = false;
        };
        auto on_loop1 = [](pool::Pool *pp) -> awaitable<Seen> {
            Seen seen;
            pool::Reply r;
            auto ctx = request("/x");
            co_await pp->exec(ctx, {}, r, {}, 1);
            seen.threads.insert(std::this_thread::get_id());
            while (r.outcome == pool::Outcome::ok && r.informational()) {
                seen.informational.push_back(r.response.status);
                co_await r.next();
                seen.threads.insert(std::this_thread::get_id());
            }
            seen.held_while_streaming = r.holds_worker();
            while (r.outcome == pool::Outcome::ok) {
                seen.body.append(r.body());
                if (!r.more())
                    break;
                co_await r.next();
                seen.threads.insert(std::this_thread::get_id());
            }
            seen.status = r.response.status;
            seen.pid = r.worker_pid;
            r.finish();
            co_return seen;
        };
        Seen seen = co_await asio::co_spawn(loops[1], on_loop1(&p), use_awaitable);
        EXPECT_EQ(seen.status, 200);
        EXPECT_TRUE(seen.held_while_streaming);
        EXPECT_EQ(seen.informational, std::vector<int>{103});
        EXPECT_EQ(seen.body, "one\ntwo\nthree\nfour\nfive\n");
        EXPECT_EQ(seen.threads, std::set<std::thread::id>{loops.thread_of(1)});
        // The worker went home: loop 0 gets it at once.
        auto e = co_await exec_on(p, loops, 0, "/x");
        EXPECT_EQ(e.result.outcome, pool::Outcome::ok) << e.result.message;
        EXPECT_EQ(e.result.worker_pid, seen.pid);
        EXPECT_EQ(e.body, seen.body);
        co_await p.shutdown();
    });
}

TEST(PoolLoops, MaxJobsAndCrashesWithSeveralLoops)
{
    Loops loops(2);
    auto o = options("echo.php", 2);
    o.max_jobs = 5;
    pool::Pool p(host(), loops.contexts(), o);
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        std::set<int> pids;
        for (int i = 0; i < 60; ++i) {
            auto e = co_await exec_on(p, loops, i % 2, "/sleep?ms=1");
            EXPECT_EQ(e.result.outcome, pool::Outcome::ok) << e.result.message;
            pids.insert(e.result.worker_pid);
        }
        EXPECT_GT(pids.size(), 2u);
        auto crash = co_await exec_on(p, loops, 1, "/exit");
        EXPECT_EQ(crash.result.outcome, pool::Outcome::worker_crashed);
        for (int i = 0; i < 6; ++i) {
            auto e = co_await exec_on(p, loops, i % 2, "/status/200");
            EXPECT_EQ(e.result.outcome, pool::Outcome::ok) << e.result.message;
        }
        co_await p.shutdown();
    });
    EXPECT_TRUE(p.workers().empty());
    EXPECT_GT(p.recycled_total(), 2u);
}

TEST(PoolLoops, ShutdownWaitsForRequestsOnEveryLoopThenStopsEveryWorker)
{
    Loops loops(2);
    pool::Pool p(host(), loops.contexts(), options("echo.php", 2));
    loops.run([&]() -> awaitable<void> {
        EXPECT_TRUE((co_await p.start()).has_value());
        Exec a, b;
        std::atomic<bool> a_done{false}, b_done{false};
        start_on(p, loops, 0, "/sleep?ms=400", &a, &a_done);
        start_on(p, loops, 1, "/sleep?ms=400", &b, &b_done);
        co_await sleep_for(100ms);
        co_await p.shutdown();
        EXPECT_TRUE(a_done.load() && b_done.load());
        EXPECT_EQ(a.result.outcome, pool::Outcome::ok);
        EXPECT_EQ(b.result.outcome, pool::Outcome::ok);
        auto after = co_await exec_on(p, loops, 1, "/status/200");
        EXPECT_EQ(after.result.outcome, pool::Outcome::no_worker);
    });
    EXPECT_TRUE(p.workers().empty());
}
