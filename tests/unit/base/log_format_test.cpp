// The logger's output: JSON lines (zap's keys, escaping, any bytes valid JSON), access lines, outputs.
#include "ferry/base/log.hpp"

#include "log_test_util.hpp"

#include "ferry/base/text.hpp"

#include <boost/json.hpp>
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
