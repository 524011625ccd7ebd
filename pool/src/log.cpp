#include "ferry/pool/log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <unistd.h>

namespace ferry::log {
namespace {
Level g_level = Level::info;

const char *name(Level l)
{
    switch (l) {
    case Level::debug:
        return "DEBUG";
    case Level::info:
        return "INFO ";
    case Level::warn:
        return "WARN ";
    case Level::error:
        return "ERROR";
    }
    return "?";
}
} // namespace

void set_level(Level l)
{
    g_level = l;
}
Level level()
{
    return g_level;
}

bool parse_level(std::string_view t, Level &out)
{
    if (t == "debug")
        out = Level::debug;
    else if (t == "info")
        out = Level::info;
    else if (t == "warn" || t == "warning")
        out = Level::warn;
    else if (t == "error")
        out = Level::error;
    else
        return false;
    return true;
}

void write(Level l, std::string_view component, std::string_view message)
{
    using namespace std::chrono;
    auto now = system_clock::now();
    std::time_t secs = system_clock::to_time_t(now);
    auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    std::string line;
    line.reserve(48 + component.size() + message.size());
    line += stamp;
    line += ' ';
    line += name(l);
    line += ' ';
    line += component;
    line += ": ";
    line += message;
    line += '\n';
    // One write(2) per line so lines from concurrent processes sharing stderr do not interleave.
    const char *p = line.data();
    std::size_t left = line.size();
    while (left > 0) {
        ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n <= 0)
            break;
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

} // namespace ferry::log
