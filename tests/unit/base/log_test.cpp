// The logger: lines from many threads whole and in order, no thread of its own, never blocking the caller,
// levels and the raw mode. Its output formats are log_format_test.cpp.
#include "ferry/base/log.hpp"

#include "log_test_util.hpp"

#include "ferry/base/text.hpp"

#include <boost/json/src.hpp> // Boost.JSON built into this test (the libraries build it in relay/)
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;

using namespace log_test;

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

// ---- encodings, levels, outputs, access lines (logs.* and http.access_logs) ----------------------------

TEST(LogLevel, FilterHidesLinesBelowTheLevel)
{
    using ferry::log::Level;
    CapturedStderr cap;
    std::string out;
    {
        ferry::log::Options o;
        o.level = Level::warn;
        Configured warn(o);
        EXPECT_FALSE(ferry::log::enabled(Level::debug));
        EXPECT_FALSE(ferry::log::enabled(Level::info));
        EXPECT_TRUE(ferry::log::enabled(Level::warn));
        ferry::log::debug("t", "debug line");
        ferry::log::info("t", "info line");
        ferry::log::write(Level::info, "t", "info written directly");
        ferry::log::access({"127.0.0.1:1", "GET", "/", 200, 1, std::chrono::microseconds(1), 0});
        ferry::log::warn("t", "warn line");
        ferry::log::error("t", "error line");
        ferry::log::set_level(Level::error); // what --log-level does after configure()
        ferry::log::warn("t", "second warn line");
        ferry::log::error("t", "second error line");
        ASSERT_TRUE(ferry::log::flush(1s));
        out = cap.drain();
    }
    EXPECT_EQ(out.find("debug line"), std::string::npos) << out;
    EXPECT_EQ(out.find("info"), std::string::npos) << out;
    EXPECT_EQ(out.find("http.access"), std::string::npos) << out;
    EXPECT_NE(out.find(" WARN  t: warn line\n"), std::string::npos) << out;
    EXPECT_NE(out.find(" ERROR t: error line\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("second warn line"), std::string::npos) << out;
    EXPECT_NE(out.find("second error line"), std::string::npos) << out;
    EXPECT_EQ(lines_of(out).size(), 3u) << out;

    // debug shows everything; the defaults (info) come back after the test
    {
        ferry::log::Options o;
        o.level = Level::debug;
        Configured debug(o);
        ferry::log::debug("t", "now a debug line");
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    EXPECT_NE(cap.drain().find(" DEBUG t: now a debug line\n"), std::string::npos);
    EXPECT_FALSE(ferry::log::enabled(Level::debug));
    EXPECT_TRUE(ferry::log::enabled(Level::info));
}

TEST(LogLevel, OffWritesNothingAtAll)
{
    CapturedStderr cap;
    {
        ferry::log::Options o;
        o.off = true;
        o.level = ferry::log::Level::debug;
        Configured off(o);
        for (auto l : {ferry::log::Level::debug, ferry::log::Level::info, ferry::log::Level::warn,
                       ferry::log::Level::error})
            EXPECT_FALSE(ferry::log::enabled(l));
        ferry::log::debug("t", "a");
        ferry::log::info("t", "b");
        ferry::log::warn("t", "c");
        ferry::log::error("t", "d");
        ferry::log::access({"127.0.0.1:1", "GET", "/", 200, 1, std::chrono::microseconds(1), 0});
        ferry::log::set_level(ferry::log::Level::debug); // --log-level does not turn it back on
        ferry::log::error("t", "e");
        ASSERT_TRUE(ferry::log::flush(1s));
        EXPECT_EQ(cap.drain(), "");
    }
    ferry::log::info("t", "back on");
    ASSERT_TRUE(ferry::log::flush(1s));
    EXPECT_NE(cap.drain().find("INFO  t: back on"), std::string::npos);
}

TEST(LogRaw, TheMessageAlone)
{
    CapturedStderr cap;
    {
        ferry::log::Options o;
        o.raw = true;
        Configured raw(o);
        ferry::log::info("worker", "pid 7: hello");
        ferry::log::access({"127.0.0.1:9", "GET", "/a", 404, 10, std::chrono::microseconds(2500), 0});
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    EXPECT_EQ(cap.drain(), "pid 7: hello\n127.0.0.1:9 \"GET /a\" 404 10 B 2.500 ms worker 0\n");
    {
        ferry::log::Options o = json_options();
        o.raw = true;
        Configured raw(o);
        ferry::log::info("worker", "pid 7: hello");
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    EXPECT_EQ(cap.drain(), "{\"msg\":\"pid 7: hello\"}\n");
}
