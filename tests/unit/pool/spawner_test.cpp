#include "spawner.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace ferry;
using namespace ferry::pool;
using namespace std::chrono_literals;

namespace {

[[maybe_unused]] const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

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
    Spawner spawner(io, opt, stopping);
    ASSERT_TRUE(spawner.prepare());
    auto launched = spawner.launch();
    ASSERT_TRUE(launched) << launched.error().message;
    WorkerPtr w = *launched;
    w->channel->watch();
    run(io, [&]() -> awaitable<void> {
        auto r = co_await spawner.handshake(w);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
    });
    EXPECT_EQ(w->codec, relay::Codec::msgpack) << "php-worker announces msgpack when ext-msgpack is loaded";
    w->channel->stdin_pipe().close();
    reap(w->pid);
}

TEST(Spawner, AFailedBootSaysHowTheProcessEndedAndWhatItPrinted)
{
    asio::io_context io;
    auto opt = options("boot_fail.php");
    Flag stopping(io);
    Spawner spawner(io, opt, stopping);
    ASSERT_TRUE(spawner.prepare());
    auto launched = spawner.launch();
    ASSERT_TRUE(launched) << launched.error().message;
    WorkerPtr w = *launched;
    w->channel->watch();
    std::string error;
    run(io, [&]() -> awaitable<void> {
        auto r = co_await spawner.handshake(w);
        EXPECT_FALSE(r);
        if (!r)
            error = r.error().message;
    });
    int status = 0;
    ::waitpid(w->pid, &status, 0);
    w->exited = true;
    w->wait_status = status;
    w->stderr_tail = "boot_fail.php: cannot boot the application (on purpose)\n";
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
    Spawner spawner(io, opt, stopping);
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
    Spawner spawner(io, opt, stopping);
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

TEST(Spawner, AHandshakeThatNeverComesTimesOut)
{
    asio::io_context io;
    auto opt = options("fds.php"); // never answers: it waits for EOF on stdin
    opt.boot_timeout = 200ms;
    Flag stopping(io);
    Spawner spawner(io, opt, stopping);
    ASSERT_TRUE(spawner.prepare());
    auto launched = spawner.launch();
    ASSERT_TRUE(launched) << launched.error().message;
    WorkerPtr w = *launched;
    w->channel->watch();
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
    w->channel->stdin_pipe().close();
    reap(w->pid);
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
