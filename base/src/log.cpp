// Logging never blocks serving and starts no thread: a second thread in the process would
// make glibc lock every malloc and wrap every read/write in cancellation bookkeeping (~0.7 us per request
// measured). Lines are written without blocking; what the output does not take now waits in a bounded buffer
// (1 MiB) that later calls and pump() retry; when it is full, lines are dropped and counted, and one line
// says how many once the output takes lines again.
//
// Writing without blocking: a pipe is reopened through /proc/self/fd/N with O_NONBLOCK (a new open file
// description: the flag does not reach whoever else shares the pipe); a socket gets send(MSG_DONTWAIT);
// a regular file or a terminal is written as is (they do not stall the way a slow reader does).
//
// The output is stderr, stdout or a file (logs.output); the encoding console or zap's JSON (logs.encoding).
// A line is built whole in one string before it is appended: the sink's lock is held for the write only.
// JSON lines stay valid whatever the bytes logged (a worker's stderr is anything): control characters,
// quotes and backslashes are escaped, bytes that are not UTF-8 become \ufffd (json_string.hpp).
#include "ferry/base/log.hpp"

#include "ferry/base/io.hpp"
#include "ferry/base/json_string.hpp"
#include "ferry/base/text.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
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

constexpr int off_threshold = 4; // above every level: nothing is written

std::atomic<Level> g_level{Level::info};
std::atomic<int> g_threshold{static_cast<int>(Level::info)}; // the lowest level written
std::atomic<bool> g_off{false}, g_json{false}, g_raw{false};

void update_threshold()
{
    g_threshold.store(g_off.load(std::memory_order_relaxed)
                          ? off_threshold
                          : static_cast<int>(g_level.load(std::memory_order_relaxed)),
                      std::memory_order_relaxed);
}

// A level's name in console lines (padded to one width, so that messages line up) and in JSON (zap's).
struct LevelNames {
    const char *console, *json;
};
const LevelNames &names(Level l)
{
    static constexpr LevelNames table[] = {
        {"DEBUG", "debug"}, {"INFO ", "info"}, {"WARN ", "warn"}, {"ERROR", "error"}};
    static constexpr LevelNames unknown{"?    ", "?"};
    const auto i = static_cast<std::size_t>(l);
    return i < std::size(table) ? table[i] : unknown;
}

// "2026-11-30T02:10:17.123Z" (UTC, milliseconds). The date and time of day are formatted once a second per
// thread: gmtime_r and snprintf on every access line would cost more than the rest of it.
void append_stamp(std::string &out)
{
    using namespace std::chrono;
    const long long now_ms = duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
    const long long secs = now_ms / 1000;
    const int ms = static_cast<int>(now_ms % 1000);
    thread_local long long cached_secs = -1;
    thread_local char cached[32];
    thread_local std::size_t cached_len = 0;
    if (secs != cached_secs) {
        const auto t = static_cast<std::time_t>(secs);
        std::tm tm{};
        gmtime_r(&t, &tm);
        const int n = std::snprintf(cached, sizeof cached, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                                    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        cached_len = n > 0 ? static_cast<std::size_t>(n) : 0;
        cached_secs = secs;
    }
    out.append(cached, cached_len);
    const char tail[5] = {'.', static_cast<char>('0' + ms / 100), static_cast<char>('0' + ms / 10 % 10),
                          static_cast<char>('0' + ms % 10), 'Z'};
    out.append(tail, sizeof tail);
}

template <typename T> void append_number(std::string &out, T value)
{
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    (void)ec; // 24 chars hold any 64-bit integer
    out.append(buf, end);
}

// Console: untrusted bytes (a request target) inside double quotes, as printable() shows them: printable
// ASCII as is, quote and backslash escaped, anything else \xNN, so that one request stays one line.
void append_printable(std::string &out, std::string_view bytes)
{
    static constexpr char hex[] = "0123456789abcdef";
    const char *run = bytes.data();
    const char *end = bytes.data() + bytes.size();
    for (const char *p = run; p < end; ++p) {
        const auto c = static_cast<unsigned char>(*p);
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\')
            continue;
        out.append(run, p);
        if (const char *esc = short_escape(c)) {
            out += esc;
        } else {
            const char x[4] = {'\\', 'x', hex[c >> 4], hex[c & 0x0F]};
            out.append(x, sizeof x);
        }
        run = p + 1;
    }
    out.append(run, end);
}

// What comes before the message: the time, level and logger (none of them when raw), and in JSON the
// opening of the object up to the "msg" key.
void open_line(std::string &line, Level l, std::string_view component, bool json, bool raw)
{
    if (json) {
        line += '{';
        if (!raw) {
            line += "\"level\":\"";
            line += names(l).json;
            line += "\",\"ts\":\"";
            append_stamp(line);
            line += "\",\"logger\":";
            append_json_string(line, component);
            line += ',';
        }
        line += "\"msg\":";
        return;
    }
    if (raw)
        return;
    append_stamp(line);
    line += ' ';
    line += names(l).console;
    line += ' ';
    line += component;
    line += ": ";
}

std::string format(Level l, std::string_view component, std::string_view message)
{
    const bool json = g_json.load(std::memory_order_relaxed);
    const bool raw = g_raw.load(std::memory_order_relaxed);
    std::string line;
    line.reserve(64 + component.size() + message.size() + (json ? message.size() / 8 : 0));
    open_line(line, l, component, json, raw);
    if (json) {
        append_json_string(line, message);
        line += "}\n";
    } else {
        line += message;
        line += '\n';
    }
    return line;
}

class Sink {
public:
    static constexpr std::size_t capacity = 1 << 20; // bytes of lines waiting for the output

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
        close_nonblocking();
    }

    // From now on lines go to `fd` (closed when replaced if `owned`). What waits for the old output goes to
    // the new one.
    void retarget(int fd, bool owned)
    {
        std::lock_guard lock(mu_);
        close_nonblocking();
        if (owned_ && target_ != fd)
            ::close(target_);
        target_ = fd;
        owned_ = owned;
    }

    bool flush(std::chrono::milliseconds limit)
    {
        auto deadline = std::chrono::steady_clock::now() + limit;
        std::unique_lock lock(mu_);
        for (;;) {
            open_if_needed();
            drain();
            if (pending_.empty() && dropped_ == 0)
                return true;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return false;
            pollfd p{fd_ >= 0 ? fd_ : target_, POLLOUT, 0};
            lock.unlock();
            ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 50)));
            lock.lock();
        }
    }

private:
    void close_nonblocking()
    {
        if (fd_ >= 0)
            ::close(fd_);
        fd_ = -1;
        opened_ = socket_ = false;
    }

    void open_if_needed()
    {
        if (opened_)
            return;
        opened_ = true;
        struct stat st {};
        if (::fstat(target_, &st) != 0)
            return;
        if (S_ISFIFO(st.st_mode)) {
            int flags = ::fcntl(target_, F_GETFL);
            const std::string path = "/proc/self/fd/" + std::to_string(target_);
            fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | (flags & O_APPEND));
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
                w = ::send(target_, p + done, n - done, MSG_DONTWAIT | MSG_NOSIGNAL);
            else
                w = ::write(fd_ >= 0 ? fd_ : target_, p + done, n - done);
            if (w > 0) {
                done += static_cast<std::size_t>(w);
                continue;
            }
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return done;
            return n; // output closed or broken: nothing else to do with these bytes
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
            const char *what = target_ == STDERR_FILENO   ? "stderr"
                               : target_ == STDOUT_FILENO ? "stdout"
                                                          : "the log output";
            std::string note =
                format(Level::warn, "core",
                       std::to_string(dropped_) + " log line(s) dropped: " + what + " is not keeping up");
            dropped_ = 0;
            std::size_t n = put(note.data(), note.size());
            if (n < note.size())
                pending_.append(note, n, std::string::npos);
        }
    }

    std::mutex mu_;
    int target_ = STDERR_FILENO; // where lines go
    bool owned_ = false;         // target_ is a file configure() opened
    bool opened_ = false, socket_ = false;
    int fd_ = -1; // target_ reopened non-blocking (a pipe)
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

Result<> configure(const Options &o)
{
    int fd = STDERR_FILENO;
    bool owned = false;
    if (o.output == "stdout") {
        fd = STDOUT_FILENO;
    } else if (!o.output.empty() && o.output != "stderr") {
        // O_NONBLOCK: a FIFO without a reader is an error now, not a start that hangs in open().
        fd =
            ::open(o.output.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
        if (fd < 0)
            return fail("cannot open " + quote(o.output) + ": " + std::strerror(errno));
        owned = true;
    }
    sink().retarget(fd, owned);
    g_json.store(o.encoding == Encoding::json, std::memory_order_relaxed);
    g_raw.store(o.raw, std::memory_order_relaxed);
    g_off.store(o.off, std::memory_order_relaxed);
    g_level.store(o.level, std::memory_order_relaxed);
    update_threshold();
    return {};
}

void set_level(Level l)
{
    g_level.store(l, std::memory_order_relaxed);
    update_threshold();
}
Level level()
{
    return g_level.load(std::memory_order_relaxed);
}

bool enabled(Level l)
{
    return static_cast<int>(l) >= g_threshold.load(std::memory_order_relaxed);
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
    if (!enabled(l))
        return;
    sink().append(format(l, component, message));
}

void access(const Access &a)
{
    if (!enabled(Level::info))
        return;
    const bool json = g_json.load(std::memory_order_relaxed);
    const bool raw = g_raw.load(std::memory_order_relaxed);
    std::string line;
    line.reserve(160 + a.remote.size() + a.method.size() + a.path.size());
    open_line(line, Level::info, "http.access", json, raw);
    const auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(a.duration.count(), 0));
    // Milliseconds with three decimals, from integers: "0.532".
    const auto append_ms = [&line, us] {
        append_number(line, us / 1000);
        const auto frac = static_cast<unsigned>(us % 1000);
        const char f[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                           static_cast<char>('0' + frac % 10)};
        line.append(f, sizeof f);
    };
    if (json) {
        line += "\"request\",\"remote\":";
        append_json_string(line, a.remote);
        line += ",\"method\":";
        append_json_string(line, a.method);
        line += ",\"path\":";
        append_json_string(line, a.path);
        line += ",\"status\":";
        append_number(line, a.status);
        line += ",\"bytes\":";
        append_number(line, a.bytes);
        line += ",\"duration_ms\":";
        append_ms();
        line += ",\"pid\":";
        append_number(line, a.worker_pid);
        line += "}\n";
    } else {
        append_printable(line, a.remote);
        line += " \"";
        append_printable(line, a.method);
        line += ' ';
        append_printable(line, a.path);
        line += "\" ";
        append_number(line, a.status);
        line += ' ';
        append_number(line, a.bytes);
        line += " B ";
        append_ms();
        line += " ms worker ";
        append_number(line, a.worker_pid);
        line += '\n';
    }
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
