#include "ferry/relay/log.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;

namespace {

// Points stderr at a pipe for the test's duration.
struct CapturedStderr {
    CapturedStderr()
    {
        std::signal(SIGPIPE, SIG_IGN);
        EXPECT_EQ(::pipe(fds), 0);
        saved = ::dup(STDERR_FILENO);
        ::dup2(fds[1], STDERR_FILENO);
        ferry::log::reopen();
    }
    ~CapturedStderr()
    {
        ::dup2(saved, STDERR_FILENO);
        ferry::log::reopen();
        ::close(saved);
        ::close(fds[0]);
        ::close(fds[1]);
    }
    // Reads what is available now (the read end is made non-blocking).
    std::string drain()
    {
        ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
        std::string out;
        char buf[65536];
        for (;;) {
            ssize_t n = ::read(fds[0], buf, sizeof buf);
            if (n <= 0)
                break;
            out.append(buf, static_cast<std::size_t>(n));
        }
        return out;
    }
    int fds[2];
    int saved;
};

} // namespace

TEST(Log, LinesFromManyThreadsArriveWholeAndInOrderPerThread)
{
    CapturedStderr cap;
    constexpr int threads = 4, lines = 150; // under the 64 KiB a pipe holds
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
        ts.emplace_back([t] {
            for (int i = 0; i < lines; ++i)
                ferry::log::warn("test", "thread " + std::to_string(t) + " line " + std::to_string(i));
        });
    for (auto &t : ts)
        t.join();
    ASSERT_TRUE(ferry::log::flush(2s));
    std::istringstream in(cap.drain());
    std::string line;
    int next[threads] = {};
    int count = 0;
    while (std::getline(in, line)) {
        auto at = line.find(" WARN  test: thread ");
        ASSERT_NE(at, std::string::npos) << line;
        int t = 0, i = 0;
        ASSERT_EQ(std::sscanf(line.c_str() + at, " WARN  test: thread %d line %d", &t, &i), 2) << line;
        EXPECT_EQ(i, next[t]++) << "lines of one thread out of order or torn: " << line;
        ++count;
    }
    EXPECT_EQ(count, threads * lines);
}

TEST(Log, NoThreadIsStarted)
{
    // A second thread would make glibc lock every malloc and wrap every read/write (measured ~0.7
    // us/request).
    CapturedStderr cap;
    ferry::log::warn("test", "hello");
    ASSERT_TRUE(ferry::log::flush(1s));
    std::ifstream status("/proc/self/status");
    std::string line;
    int threads = 0;
    while (std::getline(status, line))
        if (line.rfind("Threads:", 0) == 0)
            threads = std::stoi(line.substr(8));
    EXPECT_EQ(threads, 1);
    EXPECT_NE(cap.drain().find("WARN  test: hello"), std::string::npos);
}

TEST(Log, ASlowStderrNeverBlocksTheCaller)
{
    CapturedStderr cap; // nobody reads it until the end: the pipe (64 KiB) fills at once
    auto t0 = std::chrono::steady_clock::now();
    const std::string text(1000, 'x');
    for (int i = 0; i < 5000; ++i) // 5 MB: far more than the pipe and the buffer hold
        ferry::log::info("test", text);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, 2s) << "logging waited for stderr";
    // Now read: what was kept comes out, then one line says how many were dropped.
    std::string all;
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (all.find("log line(s) dropped") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        all += cap.drain();
        ferry::log::pump(); // what the server's tick does
        std::this_thread::sleep_for(1ms);
    }
    EXPECT_NE(all.find("log line(s) dropped: stderr is not keeping up"), std::string::npos);
    EXPECT_GT(all.size(), 1000000u) << "the buffered lines were not kept";
}
