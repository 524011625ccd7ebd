// Logging never blocks serving (issue 5 item 8): callers, on any thread, append formatted lines to a bounded
// in-memory buffer under a mutex and return; one writer thread does the blocking write(2) to stderr. When
// the buffer is full (stderr is not keeping up), lines are dropped and counted, and one line says how many
// once output flows again.
#include "ferry/pool/log.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

namespace ferry::log {
namespace {

std::atomic<Level> g_level{Level::info};

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

void write_fd(const std::string &bytes)
{
    const char *p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
        ssize_t n = ::write(STDERR_FILENO, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; // stderr closed or broken: nothing else to do with the line
        p += n;
        left -= static_cast<std::size_t>(n);
    }
}

std::string stamp()
{
    using namespace std::chrono;
    auto now = system_clock::now();
    std::time_t secs = system_clock::to_time_t(now);
    auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    return buf;
}

class Writer {
public:
    Writer() : thread_([this] { run(); }) {}

    void append(std::string &&line)
    {
        {
            std::lock_guard lock(mu_);
            if (pending_.size() + line.size() > capacity) {
                ++dropped_;
                return;
            }
            if (pending_.empty())
                pending_ = std::move(line);
            else
                pending_ += line;
        }
        cv_.notify_one();
    }

    bool flush(std::chrono::milliseconds limit)
    {
        std::unique_lock lock(mu_);
        return idle_cv_.wait_for(lock, limit, [this] { return pending_.empty() && !writing_; });
    }

    static constexpr std::size_t capacity = 1 << 20; // bytes of log lines waiting for stderr

private:
    void run()
    {
        std::string batch;
        for (;;) {
            std::uint64_t dropped = 0;
            {
                std::unique_lock lock(mu_);
                writing_ = false;
                idle_cv_.notify_all();
                cv_.wait(lock, [this] { return !pending_.empty() || dropped_ > 0; });
                batch.swap(pending_);
                pending_.clear();
                dropped = dropped_;
                dropped_ = 0;
                writing_ = true;
            }
            if (dropped > 0)
                batch += stamp() + " WARN  core: " + std::to_string(dropped) +
                         " log line(s) dropped: stderr is not keeping up\n";
            write_fd(batch);
            batch.clear();
            if (batch.capacity() > 4 * capacity)
                std::string().swap(batch);
        }
    }

    std::mutex mu_;
    std::condition_variable cv_, idle_cv_;
    std::string pending_;
    std::uint64_t dropped_ = 0;
    bool writing_ = false;
    std::thread thread_;
};

// Never destroyed: lines logged from anywhere, even during exit, find it alive; the thread ends with the
// process (main calls flush() before returning).
Writer &writer()
{
    static Writer *w = new Writer;
    return *w;
}

} // namespace

void set_level(Level l)
{
    g_level.store(l, std::memory_order_relaxed);
}
Level level()
{
    return g_level.load(std::memory_order_relaxed);
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
    std::string line;
    line.reserve(48 + component.size() + message.size());
    line += stamp();
    line += ' ';
    line += name(l);
    line += ' ';
    line += component;
    line += ": ";
    line += message;
    line += '\n';
    writer().append(std::move(line));
}

bool flush(std::chrono::milliseconds limit)
{
    return writer().flush(limit);
}

} // namespace ferry::log
