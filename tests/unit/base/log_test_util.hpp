// Helpers of the logger's tests (log_test.cpp, log_format_test.cpp): stderr captured through a pipe, the
// logger configured for a test and put back after it, and a JSON line taken apart.
#pragma once

#include "ferry/base/log.hpp"
#include "ferry/base/text.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace log_test {

using namespace std::chrono_literals;

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

// Every test below leaves the logger as it found it: console, info, stderr.
struct Configured {
    explicit Configured(ferry::log::Options o)
    {
        auto r = ferry::log::configure(o);
        EXPECT_TRUE(r) << r.error().message;
    }
    ~Configured() { EXPECT_TRUE(ferry::log::configure(ferry::log::Options{})); }
};

inline ferry::log::Options json_options()
{
    ferry::log::Options o;
    o.encoding = ferry::log::Encoding::json;
    return o;
}

inline std::vector<std::string> lines_of(const std::string &text)
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
inline boost::json::object parsed(const std::string &line)
{
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) {
        ADD_FAILURE() << "not a JSON object (" << ec.message() << "): " << ferry::printable(line, 400);
        return {};
    }
    return v.as_object();
}

inline std::string str(const boost::json::object &o, std::string_view key)
{
    const auto *v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string("<missing>");
}

inline bool is_stamp(const std::string &s)
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
inline boost::json::object json_line_of(std::string_view message)
{
    CapturedStderr cap;
    Configured json(json_options());
    ferry::log::info("worker", message);
    EXPECT_TRUE(ferry::log::flush(1s));
    const auto lines = lines_of(cap.drain());
    EXPECT_EQ(lines.size(), 1u) << ferry::printable(message, 200);
    return lines.empty() ? boost::json::object{} : parsed(lines[0]);
}

} // namespace log_test
