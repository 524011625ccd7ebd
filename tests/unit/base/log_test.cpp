#include "ferry/base/log.hpp"

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

// ---- encodings, levels, outputs, access lines (logs.* and http.access_logs) ----------------------------

namespace {

// Every test below leaves the logger as it found it: console, info, stderr.
struct Configured {
    explicit Configured(ferry::log::Options o)
    {
        auto r = ferry::log::configure(o);
        EXPECT_TRUE(r) << r.error().message;
    }
    ~Configured() { EXPECT_TRUE(ferry::log::configure(ferry::log::Options{})); }
};

ferry::log::Options json_options()
{
    ferry::log::Options o;
    o.encoding = ferry::log::Encoding::json;
    return o;
}

std::vector<std::string> lines_of(const std::string &text)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        out.push_back(line);
    return out;
}

// The line parsed strictly (Boost.JSON rejects invalid UTF-8 and raw control characters); a test failure
// and an empty object when it does not parse.
boost::json::object parsed(const std::string &line)
{
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) {
        ADD_FAILURE() << "not a JSON object (" << ec.message() << "): " << ferry::printable(line, 400);
        return {};
    }
    return v.as_object();
}

std::string str(const boost::json::object &o, std::string_view key)
{
    const auto *v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string("<missing>");
}

bool is_stamp(const std::string &s)
{
    // 2026-11-30T02:10:17.123Z
    if (s.size() != 24)
        return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char want = "0000-00-00T00:00:00.000Z"[i];
        if (want == '0' ? !std::isdigit(static_cast<unsigned char>(s[i])) : s[i] != want)
            return false;
    }
    return true;
}

// Logs `message` in JSON and returns the one line it became, parsed.
boost::json::object json_line_of(std::string_view message)
{
    CapturedStderr cap;
    Configured json(json_options());
    ferry::log::info("worker", message);
    EXPECT_TRUE(ferry::log::flush(1s));
    const auto lines = lines_of(cap.drain());
    EXPECT_EQ(lines.size(), 1u) << ferry::printable(message, 200);
    return lines.empty() ? boost::json::object{} : parsed(lines[0]);
}

} // namespace

TEST(LogJson, EveryLineIsAnObjectWithZapsKeys)
{
    CapturedStderr cap;
    {
        Configured json(json_options());
        ferry::log::info("pool", "pid 42 spawned");
        ferry::log::warn("http", "slow");
        ferry::log::error("core", "bad");
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    const auto lines = lines_of(cap.drain());
    ASSERT_EQ(lines.size(), 3u);
    const char *levels[] = {"info", "warn", "error"}, *loggers[] = {"pool", "http", "core"},
               *msgs[] = {"pid 42 spawned", "slow", "bad"};
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const auto o = parsed(lines[i]);
        EXPECT_EQ(o.size(), 4u) << lines[i];
        EXPECT_EQ(str(o, "level"), levels[i]);
        EXPECT_EQ(str(o, "logger"), loggers[i]);
        EXPECT_EQ(str(o, "msg"), msgs[i]);
        EXPECT_TRUE(is_stamp(str(o, "ts"))) << lines[i];
        EXPECT_TRUE(lines[i].starts_with("{\"level\":\"")) << "zap's key order: " << lines[i];
    }
}

TEST(LogJson, QuotesBackslashesAndControlCharactersAreEscaped)
{
    std::string every_control;
    for (int c = 0; c < 0x20; ++c)
        every_control += static_cast<char>(c);
    every_control += "\x7f\"\\/";
    const auto o = json_line_of(every_control);
    EXPECT_EQ(str(o, "msg"), every_control) << "decoded back to the same bytes";

    const std::string quoted = R"(he said "hi" \ left {"msg":"fake"})";
    EXPECT_EQ(str(json_line_of(quoted), "msg"), quoted);
}

TEST(LogJson, ValidUtf8IsKeptInvalidBytesBecomeReplacementCharacters)
{
    const std::string valid = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"; // é € 😀
    EXPECT_EQ(str(json_line_of(valid), "msg"), valid);
    const std::string fffd = "\xef\xbf\xbd";
    const std::vector<std::pair<std::string, std::string>> cases{
        {"a\xff"
         "b",
         "a" + fffd + "b"},
        {"\xc3", fffd},                                  // a lead byte alone, at the end
        {"\xc3(", fffd + "("},                           // a lead byte without its continuation
        {"\x80", fffd},                                  // a continuation byte alone
        {"\xc0\xaf", fffd + fffd},                       // overlong "/"
        {"\xe0\x80\xaf", fffd + fffd + fffd},            // overlong, 3 bytes
        {"\xed\xa0\x80", fffd + fffd + fffd},            // a UTF-16 surrogate
        {"\xf4\x90\x80\x80", fffd + fffd + fffd + fffd}, // above U+10FFFF
        {"\xf5", fffd},
        {"\xf0\x9f\x98", fffd + fffd + fffd}, // cut 4-byte sequence
    };
    for (const auto &[bytes, decoded] : cases)
        EXPECT_EQ(str(json_line_of(bytes), "msg"), decoded) << ferry::printable(bytes);
}

TEST(LogJson, ArbitraryBytesAlwaysGiveValidJson)
{
    // Every single byte, then random strings biased towards the bytes that matter (controls, quotes,
    // backslashes, UTF-8 lead and continuation bytes): each line parses strictly.
    std::vector<std::string> messages;
    for (int c = 0; c < 256; ++c)
        messages.push_back(std::string(1, static_cast<char>(c)));
    std::uint32_t seed = 12345;
    auto next = [&seed] {
        seed = seed * 1103515245u + 12345u;
        return seed >> 16;
    };
    const unsigned char interesting[] = {0x00, 0x01, 0x0a, 0x0d, 0x1b, 0x1f, '"',  '\\', 0x7f, 0x80,
                                         0xbf, 0xc2, 0xc3, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
    for (int i = 0; i < 400; ++i) {
        std::string m;
        const unsigned len = next() % 24;
        for (unsigned j = 0; j < len; ++j)
            m += static_cast<char>(next() % 2 ? interesting[next() % sizeof interesting] : next() % 256);
        messages.push_back(m);
    }
    CapturedStderr cap;
    std::string out;
    {
        Configured json(json_options());
        for (const std::string &m : messages) {
            ferry::log::info("worker", m);
            ferry::log::warn(m, "a logger name of any bytes too");
            ASSERT_TRUE(ferry::log::flush(1s));
            out += cap.drain(); // the pipe holds 64 KiB
        }
    }
    const auto lines = lines_of(out);
    ASSERT_EQ(lines.size(), 2 * messages.size()) << "a message's bytes split a line";
    for (const std::string &line : lines) {
        const auto o = parsed(line);
        EXPECT_EQ(o.size(), 4u) << ferry::printable(line, 200);
    }
}

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

TEST(LogAccess, ConsoleLine)
{
    CapturedStderr cap;
    ferry::log::access({"127.0.0.1:53412", "GET", "/x?y=1", 200, 1234, std::chrono::microseconds(532), 4242});
    ferry::log::access(
        {"[::1]:80", "POST", "/q\"\\\n\r\t\x01\xff \xc3\xa9", 502, 0, std::chrono::microseconds(1234567), 0});
    ASSERT_TRUE(ferry::log::flush(1s));
    const auto lines = lines_of(cap.drain());
    ASSERT_EQ(lines.size(), 2u);
    const std::string first =
        " INFO  http.access: 127.0.0.1:53412 \"GET /x?y=1\" 200 1234 B 0.532 ms worker 4242";
    EXPECT_TRUE(is_stamp(lines[0].substr(0, 24))) << lines[0];
    EXPECT_EQ(lines[0].substr(24), first);
    // Any byte of the target is escaped: one request stays one line, its quotes stay balanced.
    EXPECT_EQ(
        lines[1].substr(24),
        " INFO  http.access: [::1]:80 \"POST /q\\\"\\\\\\n\\r\\t\\x01\\xff \\xc3\\xa9\" 502 0 B 1234.567 ms "
        "worker 0");
}

TEST(LogAccess, JsonLine)
{
    CapturedStderr cap;
    {
        Configured json(json_options());
        ferry::log::access(
            {"127.0.0.1:53412", "GET", "/x?y=1", 200, 1234, std::chrono::microseconds(532), 4242});
        ferry::log::access({"127.0.0.1:1", "G\"T", "/\xff\n\"", 304, 18446744073709551615ull,
                            std::chrono::microseconds(12000), 0});
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    const auto lines = lines_of(cap.drain());
    ASSERT_EQ(lines.size(), 2u);
    const auto o = parsed(lines[0]);
    EXPECT_EQ(str(o, "level"), "info");
    EXPECT_TRUE(is_stamp(str(o, "ts")));
    EXPECT_EQ(str(o, "logger"), "http.access");
    EXPECT_EQ(str(o, "msg"), "request");
    EXPECT_EQ(str(o, "remote"), "127.0.0.1:53412");
    EXPECT_EQ(str(o, "method"), "GET");
    EXPECT_EQ(str(o, "path"), "/x?y=1");
    EXPECT_EQ(o.at("status").as_int64(), 200);
    EXPECT_EQ(o.at("bytes").to_number<std::uint64_t>(), 1234u);
    EXPECT_DOUBLE_EQ(o.at("duration_ms").as_double(), 0.532);
    EXPECT_EQ(o.at("pid").as_int64(), 4242);
    EXPECT_TRUE(lines[0].ends_with(
        ",\"msg\":\"request\",\"remote\":\"127.0.0.1:53412\",\"method\":\"GET\",\"path\":\"/x?y=1\","
        "\"status\":200,\"bytes\":1234,\"duration_ms\":0.532,\"pid\":4242}"))
        << lines[0];
    const auto o2 = parsed(lines[1]);
    EXPECT_EQ(str(o2, "method"), "G\"T");
    EXPECT_EQ(str(o2, "path"), "/\xef\xbf\xbd\n\"");
    EXPECT_EQ(o2.at("bytes").as_uint64(), 18446744073709551615ull);
    EXPECT_DOUBLE_EQ(o2.at("duration_ms").as_double(), 12.0);
    EXPECT_EQ(o2.at("pid").as_int64(), 0);
}

TEST(LogOutput, AFileIsAppendedTo)
{
    char dir_template[] = "/tmp/ferry-log-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    const std::string path = std::string(dir_template) + "/ferry.log";
    {
        std::ofstream(path) << "already there\n";
    }
    CapturedStderr cap;
    {
        ferry::log::Options o = json_options();
        o.output = path;
        Configured file(o);
        ferry::log::info("core", "into the file");
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    ferry::log::info("core", "back on stderr");
    ASSERT_TRUE(ferry::log::flush(1s));
    std::ifstream in(path);
    std::stringstream content;
    content << in.rdbuf();
    const auto lines = lines_of(content.str());
    ASSERT_EQ(lines.size(), 2u) << content.str();
    EXPECT_EQ(lines[0], "already there");
    EXPECT_EQ(str(parsed(lines[1]), "msg"), "into the file");
    EXPECT_EQ(cap.drain().find("into the file"), std::string::npos);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    ::unlink(path.c_str());

    // created when missing, 0644 (under the usual umask)
    const mode_t old_mask = ::umask(022);
    {
        ferry::log::Options o;
        o.output = path;
        Configured file(o);
        ferry::log::info("core", "new file");
        ASSERT_TRUE(ferry::log::flush(1s));
    }
    ::umask(old_mask);
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
    ::unlink(path.c_str());
    ::rmdir(dir_template);
}

TEST(LogOutput, AnUnopenablePathIsAnErrorAndChangesNothing)
{
    ferry::log::Options o = json_options();
    o.output = "/nonexistent-dir-of-ferry/x.log";
    const auto r = ferry::log::configure(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message,
              "cannot open \"/nonexistent-dir-of-ferry/x.log\": No such file or directory");
    CapturedStderr cap;
    ferry::log::info("core", "still console on stderr");
    ASSERT_TRUE(ferry::log::flush(1s));
    EXPECT_NE(cap.drain().find(" INFO  core: still console on stderr\n"), std::string::npos);
}

TEST(LogOutput, Stdout)
{
    std::signal(SIGPIPE, SIG_IGN);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    std::fflush(stdout);
    const int saved = ::dup(STDOUT_FILENO);
    ::dup2(fds[1], STDOUT_FILENO);
    CapturedStderr cap;
    {
        ferry::log::Options o;
        o.output = "stdout";
        Configured out(o);
        ferry::log::info("core", "on stdout");
        ferry::log::flush(1s);
    }
    ::dup2(saved, STDOUT_FILENO);
    ::close(saved);
    ::close(fds[1]);
    std::string got;
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
        got.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    EXPECT_NE(got.find(" INFO  core: on stdout\n"), std::string::npos) << got;
    EXPECT_EQ(cap.drain(), "");
}
