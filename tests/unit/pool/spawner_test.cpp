#include "spawner.hpp"

#include "ferry/pool/host.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace ferry;
using namespace ferry::pool;
using namespace std::chrono_literals;

namespace {

[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

// The process's host, as main builds it (its CPUs, its temporary directory).
const Host host;

Options options(const std::string &script)
{
    Options o;
    o.command = {"php", std::string(FERRY_SOURCE_DIR) + "/tests/php/" + script};
    o.boot_timeout = 5s;
    return o;
}

template <typename F> void run(asio::io_context &io, F body)
{
    bool done = false;
    io.restart(); // after an earlier run() ran out of work
    asio::co_spawn(io, body(), [&](std::exception_ptr e) {
        done = true;
        if (e)
            std::rethrow_exception(e);
    });
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!done && std::chrono::steady_clock::now() < deadline)
        io.run_one_for(50ms);
    ASSERT_TRUE(done) << "coroutine did not finish in time";
}

void reap(int pid)
{
    int status = 0;
    ::waitpid(pid, &status, 0);
}

} // namespace

TEST(Spawner, HandshakeLearnsTheCodec)
{
    asio::io_context io;
    auto opt = options("echo.php");
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    ASSERT_TRUE(spawner.prepare());
    auto launched = spawner.launch();
    ASSERT_TRUE(launched) << launched.error().message;
    WorkerPtr w = *launched;
    w->channel().watch();
    run(io, [&]() -> awaitable<void> {
        auto r = co_await spawner.handshake(w);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
    });
    EXPECT_EQ(w->codec(), relay::Codec::msgpack) << "php-worker announces msgpack when ext-msgpack is loaded";
    w->channel().stdin_pipe().close();
    reap(w->pid());
}

TEST(Spawner, AFailedBootSaysHowTheProcessEndedAndWhatItPrinted)
{
    asio::io_context io;
    auto opt = options("boot_fail.php");
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    ASSERT_TRUE(spawner.prepare());
    auto launched = spawner.launch();
    ASSERT_TRUE(launched) << launched.error().message;
    WorkerPtr w = *launched;
    w->channel().watch();
    std::string error;
    run(io, [&]() -> awaitable<void> {
        auto r = co_await spawner.handshake(w);
        EXPECT_FALSE(r);
        if (!r)
            error = r.error().message;
    });
    int status = 0;
    ::waitpid(w->pid(), &status, 0);
    w->on_exit(status); // as the reaper tells it
    w->keep_stderr("boot_fail.php: cannot boot the application (on purpose)\n");
    std::string msg = Spawner::boot_failure(*w, error);
    EXPECT_NE(msg.find("failed to boot: worker closed its stdout"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(exited with code 2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("its stderr: boot_fail.php: cannot boot"), std::string::npos) << msg;
}

TEST(Spawner, MissingCommandIsNamed)
{
    asio::io_context io;
    auto opt = options("echo.php");
    opt.command = {"ferry-no-such-php-xyz"};
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    auto r = spawner.prepare();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("\"ferry-no-such-php-xyz\" not found"), std::string::npos)
        << r.error().message;
}

TEST(Spawner, BackOffDoublesAndAStopCutsItShort)
{
    asio::io_context io;
    auto opt = options("echo.php");
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    auto timed = [&]() {
        auto start = std::chrono::steady_clock::now();
        run(io, [&]() -> awaitable<void> { co_await spawner.back_off(); });
        return std::chrono::steady_clock::now() - start;
    };
    EXPECT_LT(timed(), 50ms) << "no back-off before a failure";
    spawner.boot_failed("one");
    spawner.boot_failed("two");
    EXPECT_EQ(spawner.failures(), 2u);
    EXPECT_EQ(spawner.last_error(), "two");
    auto d = timed();
    EXPECT_GE(d, 200ms);
    EXPECT_LT(d, 1000ms);
    for (int i = 0; i < 5; ++i)
        spawner.boot_failed("more"); // 3.2 s
    asio::steady_timer t(io);
    t.expires_after(50ms);
    t.async_wait([&](error_code) { stopping.raise(); });
    EXPECT_LT(timed(), 1000ms) << "a stop does not wait for the back-off";
    spawner.booted();
    EXPECT_EQ(spawner.failures(), 0u);
}

// How long `waiting`'s back-off after six failures (3.2 s) lasts when `booting` reports a boot 50 ms in.
std::chrono::steady_clock::duration back_off_ended_by(bool same_loop)
{
    asio::io_context io;
    auto opt = options("echo.php");
    Flag stopping(io);
    BootReport report;
    Spawner waiting(io, opt, host, stopping, report), other(io, opt, host, stopping, report);
    Spawner &booting = same_loop ? waiting : other;
    for (int i = 0; i < 6; ++i) {
        waiting.boot_failed("failed");
        (void)waiting.report_failure();
    }
    asio::steady_timer t(io);
    t.expires_after(50ms);
    t.async_wait([&](error_code) { booting.booted(); });
    auto start = std::chrono::steady_clock::now();
    run(io, [&]() -> awaitable<void> { co_await waiting.back_off(); });
    return std::chrono::steady_clock::now() - start;
}

TEST(Spawner, AWorkerThatBootsEndsTheBackOffOfEveryLoop)
{
    EXPECT_LT(back_off_ended_by(true), 1000ms) << "the app boots again: no more waiting";
    EXPECT_LT(back_off_ended_by(false), 1000ms) << "the app boots again on the other loop";
}

TEST(Spawner, BootFailuresAreReportedOncePerBackOffStep)
{
    asio::io_context io;
    auto opt = options("echo.php");
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    // Four workers started together fail together: one report.
    spawner.boot_failed("worker 1 failed to boot");
    EXPECT_EQ(spawner.report_failure(), "worker 1 failed to boot");
    for (int i = 2; i <= 4; ++i) {
        spawner.boot_failed("worker " + std::to_string(i) + " failed to boot");
        EXPECT_EQ(spawner.report_failure(), "") << i;
    }
    // The next step (after its back-off) is reported, with the count and what was not reported.
    std::this_thread::sleep_for(120ms);
    spawner.boot_failed("worker 5 failed to boot");
    EXPECT_EQ(spawner.report_failure(),
              "worker 5 failed to boot [5 boot failures in a row, 3 not reported since the last]");
    spawner.boot_failed("worker 6 failed to boot");
    EXPECT_EQ(spawner.report_failure(), "") << "the step after five failures lasts 1.6 s";
    // A boot in between starts over: the next failure is news.
    spawner.booted();
    spawner.boot_failed("worker 7 failed to boot");
    EXPECT_EQ(spawner.report_failure(), "worker 7 failed to boot");
}

TEST(Spawner, TheLoopsOfAPoolShareOneReport)
{
    asio::io_context io;
    auto opt = options("echo.php");
    Flag stopping(io);
    BootReport report;
    Spawner first(io, opt, host, stopping, report), second(io, opt, host, stopping, report);
    first.boot_failed("worker 1 failed to boot");
    EXPECT_EQ(first.report_failure(), "worker 1 failed to boot");
    second.boot_failed("worker 2 failed to boot");
    EXPECT_EQ(second.report_failure(), "") << "another loop's worker failing in the same step";
    EXPECT_FALSE(first.boot_line_repeated("PHP Fatal error"));
    EXPECT_TRUE(second.boot_line_repeated("PHP Fatal error"));
    second.booted(); // any loop's worker booting starts over for all
    EXPECT_FALSE(first.boot_line_repeated("PHP Fatal error"));
    first.boot_failed("worker 3 failed to boot");
    EXPECT_EQ(first.report_failure(), "worker 3 failed to boot")
        << "a worker of the pool booted: the report starts over (the loop's back-off keeps its own count)";
    EXPECT_EQ(first.failures(), 2u);
}

TEST(Spawner, AMessageEveryBootingWorkerPrintsIsLoggedOnce)
{
    asio::io_context io;
    auto opt = options("echo.php");
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    EXPECT_FALSE(spawner.boot_line_repeated("PHP Parse error: syntax error in Kernel.php"));
    EXPECT_FALSE(spawner.boot_line_repeated("PHP Deprecated: something else"));
    EXPECT_TRUE(spawner.boot_line_repeated("PHP Parse error: syntax error in Kernel.php"));
    spawner.booted(); // the app booted: the next time it prints it is news
    EXPECT_FALSE(spawner.boot_line_repeated("PHP Parse error: syntax error in Kernel.php"));
    for (int i = 0; i < 1000; ++i) // bounded: a worker printing a new line at every boot
        spawner.boot_line_repeated("line " + std::to_string(i));
    EXPECT_FALSE(spawner.boot_line_repeated("line 999")) << "only the first lines are remembered";
    spawner.booted();
    const std::string long_line(16 * 1024, 'x'); // a worker's longest stderr line
    for (char c = 'a'; c < 'a' + 8; ++c)
        EXPECT_FALSE(spawner.boot_line_repeated(std::string(1, c) + long_line));
    EXPECT_TRUE(spawner.boot_line_repeated("a" + long_line)) << "the first ones fit in 64 KiB";
    EXPECT_FALSE(spawner.boot_line_repeated("h" + long_line)) << "past 64 KiB nothing more is kept";
}

TEST(Spawner, TheCommandLineInMessages)
{
    asio::io_context io;
    auto opt = options("echo.php");
    opt.command = {"php", "-d", "memory_limit=256M", "my app/worker.php", ""};
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    EXPECT_EQ(spawner.command_line(), "php -d memory_limit=256M 'my app/worker.php' ''");
    Worker w(io, 1024);
    w.launched(42, 0);
    EXPECT_EQ(Spawner::boot_failure(w, "no PID handshake within 60000 ms", spawner.command_line()),
              "worker 42 failed to boot (command: php -d memory_limit=256M 'my app/worker.php' ''): "
              "no PID handshake within 60000 ms");
}

TEST(Spawner, AHandshakeThatNeverComesTimesOut)
{
    asio::io_context io;
    auto opt = options("fds.php"); // never answers: it waits for EOF on stdin
    opt.boot_timeout = 200ms;
    Flag stopping(io);
    BootReport report;
    Spawner spawner(io, opt, host, stopping, report);
    ASSERT_TRUE(spawner.prepare());
    auto launched = spawner.launch();
    ASSERT_TRUE(launched) << launched.error().message;
    WorkerPtr w = *launched;
    w->channel().watch();
    std::string error;
    auto start = std::chrono::steady_clock::now();
    run(io, [&]() -> awaitable<void> {
        auto r = co_await spawner.handshake(w);
        EXPECT_FALSE(r);
        if (!r)
            error = r.error().message;
    });
    EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
    EXPECT_EQ(error, "no PID handshake within 200 ms");
    w->channel().stdin_pipe().close();
    reap(w->pid());
}

TEST(Spawner, APhpLevelTemplateNeedsACommandThatStartsPhpItself)
{
    for (const char *php : {"php", "php8.2", "php83", "php-cli", "/usr/bin/php", "/opt/php/8.3/bin/php8.3"})
        EXPECT_TRUE(detail::is_php_cli(php)) << php;
    // A wrapper would not pass `-d auto_prepend_file` on to PHP (or not as the first option), and php-fpm,
    // phpunit or a script named like php are not PHP's CLI.
    for (const char *other : {"env", "/bin/sh", "php-fpm8.2", "phpunit", "/usr/bin/php/run", "./php.sh", ""})
        EXPECT_FALSE(detail::is_php_cli(other)) << other;
}
