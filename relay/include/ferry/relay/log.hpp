// Logger: one line per event on stderr, "2026-11-30T02:10:17.123Z INFO pool: text". Safe from any thread;
// never blocks the caller on stderr: what stderr does not take at once waits in a bounded buffer, retried by
// later lines and by pump(); beyond it lines are dropped and counted.
#pragma once

#include <chrono>
#include <string_view>

namespace ferry::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

void set_level(Level level);
Level level();
// Parses "debug", "info", "warn"/"warning", "error"; returns false if unknown.
bool parse_level(std::string_view text, Level &out);

void write(Level level, std::string_view component, std::string_view message);
// Retries what stderr did not take yet (the server calls it on its 250 ms tick).
void pump();
// Looks at stderr again after it was redirected (dup2 onto fd 2).
void reopen();
// Waits up to `limit` for every line logged so far to reach stderr; false if it could not (stderr blocked).
bool flush(std::chrono::milliseconds limit = std::chrono::seconds(2));

inline bool enabled(Level l)
{
    return static_cast<int>(l) >= static_cast<int>(level());
}
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
    write(Level::warn, c, m);
}
inline void error(std::string_view c, std::string_view m)
{
    write(Level::error, c, m);
}

} // namespace ferry::log
