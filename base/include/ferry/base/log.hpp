// Logger: one line per event, "2026-11-30T02:10:17.123Z INFO  pool: text" (console) or zap's JSON object
// {"level":"info","ts":"2026-11-30T02:10:17.123Z","logger":"pool","msg":"text"} (json), on stderr unless
// configured otherwise (logs.* in the config). Safe from any thread; never blocks the caller on its output:
// what the output does not take at once waits in a bounded buffer, retried by later lines and by pump();
// beyond it lines are dropped and counted.
#pragma once

#include "ferry/base/result.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };
enum class Encoding { console, json };

// What the logs section asks for (server/main.cpp fills it from conf::LogsConfig).
struct Options {
    Level level = Level::info;
    Encoding encoding = Encoding::console;
    bool raw = false; // the message (and an access line's fields) only: no time, level or logger
    bool off = false; // nothing at all is logged
    // "stderr", "stdout" or a file path: appended to, created 0644 when missing.
    std::string output = "stderr";
};

// Applies `options` to every line logged from now on; an output file that cannot be opened is an error (and
// nothing changes).
Result<> configure(const Options &options);

void set_level(Level level);
Level level();
// Parses "debug", "info", "warn"/"warning", "error"; returns false if unknown.
bool parse_level(std::string_view text, Level &out);
// A line of `level` would be written (false for every level when logging is off).
bool enabled(Level level);

void write(Level level, std::string_view component, std::string_view message);
// Retries what the output did not take yet (the server calls it on its 250 ms tick).
void pump();
// Looks at the output again after it was redirected (dup2 onto fd 2 or 1).
void reopen();
// Waits up to `limit` for every line logged so far to reach the output; false if it could not (blocked).
bool flush(std::chrono::milliseconds limit = std::chrono::seconds(2));

// One request of http.access_logs.
struct Access {
    std::string_view remote; // the peer address, "127.0.0.1"
    std::string_view method; // "GET"
    std::string_view path;   // the request target as sent (may contain any bytes: escaped)
    int status = 0;
    std::uint64_t bytes = 0; // response bytes written (head + body)
    std::chrono::microseconds duration{0};
    int worker_pid = 0; // 0 when no PHP worker served it (static file, error)
};
// One line at info level, logger "http.access": `127.0.0.1 "GET /x?y=1" 200 1234 B 0.532 ms worker
// 4242` (console), or msg "request" with the fields remote, method, path, status, bytes, duration_ms, pid
// (json). Built in one string, appended once: it runs per request.
void access(const Access &a);

inline void debug(std::string_view c, std::string_view m)
{
    if (enabled(Level::debug))
        write(Level::debug, c, m);
}
inline void info(std::string_view c, std::string_view m)
{
    if (enabled(Level::info))
        write(Level::info, c, m);
}
inline void warn(std::string_view c, std::string_view m)
{
    if (enabled(Level::warn))
        write(Level::warn, c, m);
}
inline void error(std::string_view c, std::string_view m)
{
    if (enabled(Level::error))
        write(Level::error, c, m);
}

} // namespace ferry::log
