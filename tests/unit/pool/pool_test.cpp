// The pool on one loop: requests, errors, crashes, stop requests, max_jobs, allocate_timeout, boot failures,
// shutdown, two pools of one host. The reply a request gets is reply_test.cpp's.
#include "pool_test_util.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <csignal>
#include <fstream>
#include <optional>
#include <thread>

using namespace ferry;
using namespace std::chrono_literals;
using namespace pool_test;

namespace {

struct Exec {
    pool::Reply result;
    std::string body;
};

awaitable<Exec> exec(pool::Pool &p, const std::string &path, std::string_view body = {})
{
    Exec e;
    auto ctx = request(path, body.empty() ? "GET" : "POST");
    pool::BodyRef ref;
    ref.memory = body;
    ref.size = body.size();
    co_await p.exec(ctx, ref, e.result);
    e.body = co_await e.result.collect();
    co_return e;
}

} // namespace

TEST(Pool, ServesRequestsAndKeepsWorkersAlive)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php", 2));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        EXPECT_EQ(p.workers().size(), 2u);
        auto a = co_await exec(p, "/status/201");
        EXPECT_EQ(a.result.outcome, pool::Outcome::ok);
        EXPECT_EQ(a.result.response.status, 201);
        EXPECT_EQ(a.body, "status 201\n");
        auto b = co_await exec(p, "/echo-body", "payload \x01\x02 bytes");
        EXPECT_EQ(b.body, "payload \x01\x02 bytes");
        auto c = co_await exec(p, "/anything?x=1");
        auto v = boost::json::parse(c.body);
        EXPECT_EQ(v.at("rawQuery").as_string(), "x=1");
        EXPECT_EQ(v.at("codec").as_string(), "msgpack")
            << "php-worker announces msgpack when ext-msgpack is loaded";
        EXPECT_EQ(p.spawned_total(), 2u) << "no worker was replaced";
        co_await p.shutdown();
        EXPECT_TRUE(p.workers().empty());
    });
}

TEST(Pool, ErrorFrameIsAnErrorAndTheWorkerStays)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php"));
    run(io, [&]() -> awaitable<void> {
        co_await p.start();
        auto e = co_await exec(p, "/error");
        EXPECT_EQ(e.result.outcome, pool::Outcome::worker_error);
        EXPECT_NE(e.result.message.find("boom from echo.php"), std::string::npos) << e.result.message;
        auto ok = co_await exec(p, "/status/200");
        EXPECT_EQ(ok.result.outcome, pool::Outcome::ok);
        EXPECT_EQ(ok.result.worker_pid, e.result.worker_pid);
        EXPECT_EQ(p.spawned_total(), 1u);
        co_await p.shutdown();
    });
}

TEST(Pool, CrashMidRequestIsReportedAndTheWorkerReplaced)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php"));
    run(io, [&]() -> awaitable<void> {
        co_await p.start();
        auto e = co_await exec(p, "/exit");
        EXPECT_EQ(e.result.outcome, pool::Outcome::worker_crashed);
        auto ok = co_await exec(p, "/status/200");
        EXPECT_EQ(ok.result.outcome, pool::Outcome::ok);
        EXPECT_NE(ok.result.worker_pid, e.result.worker_pid);
        EXPECT_EQ(p.spawned_total(), 2u);
        co_await p.shutdown();
    });
}

TEST(Pool, WorkerAskingToStopHandsTheRequestToAnother)
{
    std::string flag = ::testing::TempDir() + "ferry_stop_once_" + std::to_string(::getpid());
    std::remove(flag.c_str());
    asio::io_context io;
    auto o = options("echo.php", 2);
    o.env = {"FERRY_TEST_STOP_ONCE=" + flag};
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        co_await p.start();
        auto e = co_await exec(p, "/stop");
        EXPECT_EQ(e.result.outcome, pool::Outcome::ok);
        EXPECT_EQ(e.result.response.status, 200);
        EXPECT_EQ(p.recycled_total(), 1u);
        co_await p.shutdown();
    });
    std::remove(flag.c_str());
}

TEST(Pool, MaxJobsRecyclesWithoutFailingARequest)
{
    asio::io_context io;
    auto o = options("echo.php", 1);
    o.max_jobs = 3;
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        co_await p.start();
        std::set<int> pids;
        for (int i = 0; i < 40; ++i) {
            auto e = co_await exec(p, "/sleep?ms=2");
            EXPECT_EQ(e.result.outcome, pool::Outcome::ok) << e.result.message;
            pids.insert(e.result.worker_pid);
        }
        EXPECT_GT(p.recycled_total(), 1u);
        EXPECT_GT(pids.size(), 1u);
        co_await p.shutdown();
    });
}

TEST(Pool, AllocateTimeoutGivesNoWorker)
{
    asio::io_context io;
    auto o = options("echo.php", 1);
    o.allocate_timeout = 300ms;
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        co_await p.start();
        std::optional<Exec> slow;
        asio::co_spawn(
            io, [&]() -> awaitable<void> { slow = co_await exec(p, "/sleep?ms=1500"); }, asio::detached);
        asio::steady_timer t(io);
        t.expires_after(50ms);
        co_await t.async_wait(use_awaitable);
        auto start = std::chrono::steady_clock::now();
        auto e = co_await exec(p, "/status/200");
        auto waited = std::chrono::steady_clock::now() - start;
        EXPECT_EQ(e.result.outcome, pool::Outcome::no_worker);
        EXPECT_NE(e.result.message.find("allocate_timeout"), std::string::npos) << e.result.message;
        EXPECT_GE(waited, 250ms);
        EXPECT_LT(waited, 1200ms);
        while (!slow) {
            t.expires_after(20ms);
            co_await t.async_wait(use_awaitable);
        }
        EXPECT_EQ(slow->result.outcome, pool::Outcome::ok);
        co_await p.shutdown();
    });
}

TEST(Pool, BootFailuresAreReportedWithStderrAndExitCode)
{
    for (const char *script : {"boot_fail.php", "boot_syntax.php"}) {
        asio::io_context io;
        pool::Pool p(host(), io, options(script));
        run(io, [&]() -> awaitable<void> {
            std::string err = error_of(co_await p.start());
            EXPECT_NE(err.find("failed to boot"), std::string::npos) << err;
            EXPECT_NE(err.find("exited with code"), std::string::npos) << err;
            auto e = co_await exec(p, "/");
            EXPECT_EQ(e.result.outcome, pool::Outcome::no_worker);
            EXPECT_NE(e.result.message.find("failed to boot"), std::string::npos) << e.result.message;
            co_await p.shutdown();
        });
    }
}

TEST(Pool, StrayStdoutIsReportedWithItsBytes)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("stdout_garbage.php"));
    run(io, [&]() -> awaitable<void> {
        std::string err = error_of(co_await p.start());
        EXPECT_NE(err.find("hello from a stray echo"), std::string::npos) << err;
        co_await p.shutdown();
    });
}

TEST(Pool, MissingCommandIsNamed)
{
    asio::io_context io;
    auto o = options("echo.php");
    o.command = {"ferry-no-such-php-xyz", "w.php"};
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        std::string err = error_of(co_await p.start());
        EXPECT_NE(err.find("ferry-no-such-php-xyz"), std::string::npos) << err;
        EXPECT_NE(err.find("not found"), std::string::npos) << err;
    });
}

TEST(Pool, ShutdownEscalatesForAWorkerThatIgnoresStop)
{
    asio::io_context io;
    auto o = options("slow_stop.php");
    o.destroy_timeout = 300ms;
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        auto pid = p.workers().at(0).pid;
        auto start = std::chrono::steady_clock::now();
        co_await p.shutdown();
        EXPECT_LT(std::chrono::steady_clock::now() - start, 6s);
        EXPECT_TRUE(p.workers().empty());
        EXPECT_NE(::kill(pid, 0), 0) << "the worker must be gone";
    });
}

// Whether process `pid` ignores SIGTERM: the SigIgn mask of /proc/PID/status.
static bool ignores_sigterm(int pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("SigIgn:", 0) == 0)
            return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1u;
    return false;
}

TEST(Pool, AStopKillsAWorkerThatIgnoresSigtermWhileItBoots)
{
    // It has no request to lose: a second after the stop's SIGTERM it is killed, not waited for (30 s).
    asio::io_context io;
    pool::Pool p(host(), io, options("deaf_boot.php"));
    run(io, [&]() -> awaitable<void> {
        asio::co_spawn(io, p.start(), asio::detached);
        // Until it is spawned and ignores SIGTERM (SigIgn in /proc/PID/status), 10 s at most.
        asio::steady_timer t(io);
        int pid = 0;
        for (int i = 0; i < 200 && !(pid > 0 && ignores_sigterm(pid)); ++i) {
            t.expires_after(50ms);
            co_await t.async_wait(asio::use_awaitable);
            pid = p.workers().empty() ? 0 : p.workers().at(0).pid;
        }
        EXPECT_TRUE(pid > 0 && ignores_sigterm(pid)) << "the worker never ignored SIGTERM";
        const auto start = std::chrono::steady_clock::now();
        co_await p.shutdown();
        const auto took = std::chrono::steady_clock::now() - start;
        EXPECT_GE(took, 900ms) << "the SIGTERM was ignored: it cannot have ended sooner";
        EXPECT_LT(took, 2500ms);
        EXPECT_TRUE(p.workers().empty());
        EXPECT_NE(::kill(pid, 0), 0) << "the worker must be gone";
    });
}

TEST(Pool, RepeatedBootFailuresBackOffExponentially)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("boot_fail.php"));
    run(io, [&]() -> awaitable<void> {
        co_await p.start();
        asio::steady_timer t(io);
        t.expires_after(2s);
        co_await t.async_wait(use_awaitable);
        // Delays 100, 200, 400, 800 ms...: about 5 attempts in 2 s, not hundreds.
        EXPECT_GE(p.spawned_total(), 3u);
        EXPECT_LE(p.spawned_total(), 8u);
        co_await p.shutdown();
    });
}

TEST(Pool, AWorkerThatDiedWhileIdleDoesNotFailTheNextRequest)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php", 1));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        int pid = p.workers().at(0).pid;
        ::kill(pid, SIGKILL);
        // Block the loop until the process is a zombie: its pipes are closed, but the pool has not reaped it.
        for (int i = 0; i < 500; ++i) {
            std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
            std::string pid_s, comm, state;
            stat >> pid_s >> comm >> state;
            if (state == "Z")
                break;
            std::this_thread::sleep_for(10ms);
        }
        auto e = co_await exec(p, "/status/200");
        EXPECT_EQ(e.result.outcome, pool::Outcome::ok) << e.result.message;
        EXPECT_NE(e.result.worker_pid, pid);
        co_await p.shutdown();
    });
}

TEST(Pool, RetriesForStopRequestsAreBounded)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php", 1));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        auto e = co_await exec(p, "/stop-always");
        EXPECT_EQ(e.result.outcome, pool::Outcome::no_worker);
        EXPECT_NE(e.result.message.find("asked to stop"), std::string::npos) << e.result.message;
        EXPECT_EQ(p.recycled_total(), 3u) << "num_workers + 2 attempts";
        auto ok = co_await exec(p, "/status/200");
        EXPECT_EQ(ok.result.outcome, pool::Outcome::ok) << "the pool recovers";
        co_await p.shutdown();
    });
}

// Both pools' reapers call waitpid(-1), so either may reap the other's worker (on one loop, the one whose
// wait comes first reaps every child): each exit must still reach the pool that owns it (the host's process
// table), which replaces the worker. Workers of both pools are killed in turn.
TEST(Pool, TwoPoolsOfOneHostEachHearOfTheirOwnWorkersExits)
{
    asio::io_context io;
    pool::Pool a(host(), io, options("echo.php", 1)), b(host(), io, options("echo.php", 1));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await a.start()));
        EXPECT_TRUE(started(co_await b.start()));
        auto only_pid = [](const pool::Pool &p) { return p.workers().size() == 1 ? p.workers()[0].pid : 0; };
        asio::steady_timer tick(io);
        constexpr int rounds = 6;
        for (int round = 0; round < rounds; ++round) {
            pool::Pool &victims = round % 2 == 0 ? b : a, &other = round % 2 == 0 ? a : b;
            const int victim = only_pid(victims), bystander = only_pid(other);
            EXPECT_GT(victim, 0);
            ::kill(victim, SIGKILL);
            for (int i = 0; i < 300 && (only_pid(victims) == victim || victims.serving_workers() == 0); ++i) {
                tick.expires_after(10ms);
                co_await tick.async_wait(asio::use_awaitable);
            }
            EXPECT_NE(only_pid(victims), victim)
                << "round " << round << ": the pool never heard of its worker's exit";
            EXPECT_EQ(only_pid(other), bystander) << "round " << round << ": the other pool lost nothing";
            auto e = co_await exec(victims, "/after-a-crash");
            EXPECT_EQ(e.result.outcome, pool::Outcome::ok);
        }
        const auto crash = static_cast<unsigned>(pool::Cause::crash);
        EXPECT_EQ(a.stats().exits[crash], static_cast<unsigned>(rounds / 2));
        EXPECT_EQ(b.stats().exits[crash], static_cast<unsigned>(rounds / 2));
        co_await b.shutdown();
        co_await a.shutdown();
    });
}
