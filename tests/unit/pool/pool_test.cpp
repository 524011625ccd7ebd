#include "ferry/pool/pool.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <csignal>
#include <fstream>
#include <optional>
#include <thread>

using namespace ferry;
using namespace std::chrono_literals;

namespace {

// SIGPIPE is main()'s to decide (ferry ignores it); these tests write to dead workers, so they do too.
[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

std::string fixture(const std::string &name)
{
    return std::string(FERRY_SOURCE_DIR) + "/tests/php/" + name;
}

// The test process's host, as main builds one for the server: every pool of the process shares it.
std::shared_ptr<pool::Host> host()
{
    static const auto h = std::make_shared<pool::Host>();
    return h;
}

pool::Options options(const std::string &script, unsigned workers = 1)
{
    pool::Options o;
    o.command = {"php", fixture(script)};
    o.num_workers = workers;
    o.allocate_timeout = 5s;
    o.destroy_timeout = 3s;
    o.boot_timeout = 5s;
    return o;
}

relay::RequestContext request(const std::string &path, const std::string &method = "GET")
{
    relay::RequestContext c;
    c.remote_addr = "127.0.0.1";
    c.protocol = "HTTP/1.1";
    c.method = method;
    c.uri = "http://test" + path;
    if (auto q = path.find('?'); q != std::string::npos)
        c.raw_query = path.substr(q + 1);
    c.headers = {{"Content-Type", {"text/plain"}}};
    return c;
}

// start()'s outcome for EXPECT_TRUE, with the error message when it failed.
::testing::AssertionResult started(const Result<void> &r)
{
    if (r)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r.error().message;
}

// start()'s error message ("" when it succeeded).
std::string error_of(const Result<void> &r)
{
    return r ? std::string() : r.error().message;
}

// Runs `body` as a coroutine on a fresh io_context, bounded in time.
template <typename F> void run(asio::io_context &io, F body)
{
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(io, body(), [&](std::exception_ptr e) {
        done = true;
        error = e;
        io.stop();
    });
    io.run_for(60s);
    ASSERT_TRUE(done) << "coroutine did not finish in time";
    if (error)
        std::rethrow_exception(error);
}

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

// The reply is pulled: the 103 first, then the stream chunk by chunk (the fifth asks for a PONG, sent when
// the sixth piece is asked for); finished early, the stream is stopped (STOP) and drained, not killed.
TEST(Pool, StreamsWithEarlyHintsPingAndStop)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("stream.php"));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        pool::Reply r;
        auto ctx = request("/x");
        co_await p.exec(ctx, {}, r);
        EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
        std::vector<int> informational;
        while (r.outcome == pool::Outcome::ok && r.informational()) {
            informational.push_back(r.response.status);
            co_await r.next();
        }
        EXPECT_EQ(informational, std::vector<int>{103});
        EXPECT_EQ(r.response.status, 200);
        EXPECT_TRUE(r.more()) << "a stream";
        EXPECT_TRUE(r.holds_worker()) << "the worker is the stream's until it ends";
        std::string body;
        int chunks = 0;
        for (;;) {
            body.append(r.body());
            ++chunks;
            if (!r.more())
                break;
            co_await r.next();
        }
        EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
        EXPECT_EQ(body, "one\ntwo\nthree\nfour\nfive\n");
        const int pid = r.worker_pid;
        r.finish();
        EXPECT_FALSE(r.holds_worker());

        pool::Reply quitter;
        auto ctx2 = request("/stream-long");
        co_await p.exec(ctx2, {}, quitter);
        for (int i = 0; i < 2 && quitter.more(); ++i)
            co_await quitter.next();
        EXPECT_TRUE(quitter.more()) << "50 chunks: more to come";
        EXPECT_EQ(quitter.body(), std::string(1024, 'c'));
        quitter.finish(); // before its end: STOP
        // The same worker serves the next request once the stream is drained: it was stopped, not killed.
        pool::Reply again;
        co_await p.exec(ctx, {}, again);
        EXPECT_EQ(again.outcome, pool::Outcome::ok);
        EXPECT_EQ(again.worker_pid, pid);
        EXPECT_EQ(co_await again.collect(), "one\ntwo\nthree\nfour\nfive\n");
        EXPECT_EQ(p.spawned_total(), 1u);
        co_await p.shutdown();
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

TEST(Pool, LargeBodiesAreHandedOverWithoutACopyWithinTheBudget)
{
    asio::io_context io;
    Budget budget(3 << 20);
    auto o = options("echo.php", 1);
    o.budget = &budget;
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        auto ctx = request("/big?n=2000000");
        pool::Reply r;
        co_await p.exec(ctx, pool::BodyRef{}, r);
        EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
        EXPECT_FALSE(r.more());
        EXPECT_FALSE(r.holds_worker()) << "handed over: the worker is free";
        EXPECT_EQ(r.body(), std::string(2000000, 'x'));
        EXPECT_EQ(budget.used(), 2000000u) << "the handed-over body counts against the budget";
        // While this one is held, another 2 MB answer does not fit: it stays in the worker's buffer, the
        // worker held until the reply is finished.
        pool::Reply r2;
        co_await p.exec(ctx, pool::BodyRef{}, r2);
        EXPECT_EQ(r2.outcome, pool::Outcome::ok) << r2.message;
        EXPECT_TRUE(r2.holds_worker());
        EXPECT_EQ(r2.body(), std::string(2000000, 'x'));
        EXPECT_EQ(budget.used(), 2000000u);
        EXPECT_EQ(p.workers().at(0).state, "working") << "held by the reply";
        r2.finish();
        EXPECT_EQ(p.workers().at(0).state, "ready") << "finish() gives the worker back";
        r.finish();
        EXPECT_EQ(budget.used(), 0u) << "finishing the reply gives the bytes back";
        // Small answers are plain copies; the reply is reused.
        co_await p.exec(request("/big?n=1000"), pool::BodyRef{}, r);
        EXPECT_EQ(r.body(), std::string(1000, 'x'));
        EXPECT_FALSE(r.holds_worker());
        EXPECT_EQ(budget.used(), 0u);
        // Moving a reply keeps its body (a short one lives inside the string).
        co_await p.exec(request("/big?n=5"), pool::BodyRef{}, r);
        pool::Reply moved = std::move(r);
        EXPECT_EQ(moved.body(), "xxxxx");
        co_await p.shutdown();
    });
}

TEST(Pool, ABodyInAFileReachesTheWorker)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php", 1));
    std::string content(3 * 1000 * 1000 + 7, '\0');
    for (std::size_t i = 0; i < content.size(); ++i)
        content[i] = static_cast<char>('a' + i % 26);
    char path[] = "/tmp/ferry-pool-test-XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        pool::BodyRef body;
        body.fd = fd;
        body.size = content.size();
        for (int i = 0; i < 2; ++i) { // read from offset 0 every time (a retry sends it again)
            pool::Reply r;
            co_await p.exec(request("/echo-body", "POST"), body, r);
            EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
            EXPECT_TRUE(r.body() == content) << "body size " << r.body().size();
        }
        co_await p.shutdown();
    });
    ::close(fd);
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
