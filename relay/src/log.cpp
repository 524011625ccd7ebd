// Logging never blocks serving and starts no thread: a second thread in the process would
// make glibc lock every malloc and wrap every read/write in cancellation bookkeeping (~0.7 us per request
// measured). Lines are written without blocking; what stderr does not take now waits in a bounded buffer
// (1 MiB) that later calls and pump() retry; when it is full, lines are dropped and counted, and one line
// says how many once stderr takes lines again.
//
// Writing without blocking: a pipe is reopened through /proc/self/fd/2 with O_NONBLOCK (a new open file
// description: the flag does not reach whoever else shares the pipe); a socket gets send(MSG_DONTWAIT);
// a regular file or a terminal is written as is (they do not stall the way a slow reader does).
#include "ferry/relay/log.hpp"

#include "ferry/relay/io.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
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

class Sink {
public:
    static constexpr std::size_t capacity = 1 << 20; // bytes of lines waiting for stderr

    void append(std::string &&line)
    {
        std::lock_guard lock(mu_);
        open_if_needed();
        drain();
        if (!pending_.empty() || dropped_ > 0) {
            if (pending_.size() + line.size() > capacity) {
                ++dropped_;
                return;
            }
            pending_ += line;
            return;
        }
        std::size_t n = put(line.data(), line.size());
        if (n < line.size())
            pending_.append(line, n, std::string::npos);
    }

    void pump()
    {
        std::lock_guard lock(mu_);
        drain();
    }

    void reopen()
    {
        std::lock_guard lock(mu_);
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
        opened_ = socket_ = false;
    }

    bool flush(std::chrono::milliseconds limit)
    {
        auto deadline = std::chrono::steady_clock::now() + limit;
        std::unique_lock lock(mu_);
        for (;;) {
            drain();
            if (pending_.empty() && dropped_ == 0)
                return true;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return false;
            pollfd p{fd_ >= 0 ? fd_ : STDERR_FILENO, POLLOUT, 0};
            lock.unlock();
            ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 50)));
            lock.lock();
        }
    }

private:
    void open_if_needed()
    {
        if (opened_)
            return;
        opened_ = true;
        struct stat st {};
        if (::fstat(STDERR_FILENO, &st) != 0)
            return;
        if (S_ISFIFO(st.st_mode)) {
            int flags = ::fcntl(STDERR_FILENO, F_GETFL);
            fd_ = ::open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC | (flags & O_APPEND));
        } else if (S_ISSOCK(st.st_mode)) {
            socket_ = true;
        }
    }

    // Writes what it can now; returns how much.
    std::size_t put(const char *p, std::size_t n)
    {
        std::size_t done = 0;
        while (done < n) {
            ssize_t w;
            if (socket_)
                w = ::send(STDERR_FILENO, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL);
            else
                w = ::write(fd_ >= 0 ? fd_ : STDERR_FILENO, p + done, n - done);
            if (w > 0) {
                done += static_cast<std::size_t>(w);
                continue;
            }
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return done;
            return n; // stderr closed or broken: nothing else to do with these bytes
        }
        return done;
    }

    void drain()
    {
        if (!pending_.empty()) {
            std::size_t n = put(pending_.data(), pending_.size());
            pending_.erase(0, n);
            if (!pending_.empty())
                return;
            if (pending_.capacity() > 64 * 1024)
                std::string().swap(pending_);
        }
        if (dropped_ > 0) {
            std::string note = stamp() + " WARN  core: " + std::to_string(dropped_) +
                               " log line(s) dropped: stderr is not keeping up\n";
            dropped_ = 0;
            std::size_t n = put(note.data(), note.size());
            if (n < note.size())
                pending_.append(note, n, std::string::npos);
        }
    }

    std::mutex mu_;
    bool opened_ = false, socket_ = false;
    int fd_ = -1;
    std::string pending_;
    std::uint64_t dropped_ = 0;
};

// Never destroyed: lines logged from anywhere, even during exit, find it alive.
Sink &sink()
{
    static Sink *s = new Sink;
    return *s;
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
    sink().append(std::move(line));
}

void pump()
{
    sink().pump();
}

void reopen()
{
    sink().reopen();
}

bool flush(std::chrono::milliseconds limit)
{
    return sink().flush(limit);
}

} // namespace ferry::log

namespace ferry {

void log_exceptions::operator()(std::exception_ptr e) const
{
    if (!e)
        return;
    try {
        std::rethrow_exception(e);
    } catch (const std::exception &ex) {
        log::error("core", std::string(what) + ": " + ex.what());
    } catch (...) {
        log::error("core", std::string(what) + ": unknown exception");
    }
}

} // namespace ferry
