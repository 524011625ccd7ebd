#include "worker.hpp"

#include "ferry/base/log.hpp"
#include "ferry/relay/frame.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <sys/wait.h>
#include <unistd.h>

namespace ferry::pool {

const char *state_name(State s)
{
    switch (s) {
    case State::spawning:
        return "spawning";
    case State::ready:
        return "ready";
    case State::working:
        return "working";
    case State::stopping:
        return "stopping";
    case State::dead:
        return "stopped";
    }
    return "?";
}

bool Worker::refuse(State next) const
{
    log::error("pool",
               tag() + ": no move from " + state_name(state_) + " to " + state_name(next) + " (ignored)");
    return false;
}

const char *recycle_name(Recycle r)
{
    static constexpr const char *names[] = {"serving", "marked", "replaced", "on_release"};
    return names[static_cast<unsigned>(r)];
}

bool Worker::refuse(Recycle next) const
{
    log::error("pool", tag() + ": no recycling move from " + recycle_name(recycle_) + " to " +
                           recycle_name(next) + " (ignored)");
    return false;
}

const char *cause_name(Cause c)
{
    static constexpr const char *names[] = {
        "none",  "max_jobs", "ttl",         "idle_ttl", "memory", "exec_ttl",     "client_gone",
        "reset", "debug",    "worker_stop", "error",    "crash",  "boot_failure", "shutdown"};
    static_assert(std::size(names) == static_cast<unsigned>(Cause::count_));
    auto i = static_cast<unsigned>(c);
    return i < std::size(names) ? names[i] : "?";
}

std::uint64_t Histogram::total() const
{
    std::uint64_t n = 0;
    for (auto c : count)
        n += c;
    return n;
}

void Histogram::add(const Histogram &o)
{
    for (std::size_t i = 0; i < buckets; ++i)
        count[i] += o.count[i];
    sum_us += o.sum_us;
}

std::uint64_t read_rss(int pid)
{
    // statm's second field: resident pages. One open/read/close (a few microseconds), no parsing of status.
    char path[40];
    std::snprintf(path, sizeof path, "/proc/%d/statm", pid);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[128];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    return resident * page;
}

std::string describe_status(int status)
{
    if (WIFEXITED(status))
        return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        const char *name = sigabbrev_np(sig);
        return "killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
    }
    return "ended with status " + std::to_string(status);
}

Worker::Worker(asio::io_context &io, std::uint32_t max_payload, int control_fd)
    : is_template(control_fd >= 0), channel_(std::make_shared<relay::Channel>(io, max_payload)), err_(io),
      control_fd_(control_fd), exit_event_(io)
{
}

Worker::~Worker()
{
    close_control();
}

void Worker::close_control()
{
    if (control_fd_ >= 0)
        ::close(control_fd_);
    control_fd_ = -1;
}

void Worker::on_exit(int status)
{
    exited_ = true;
    wait_status_ = status;
    kill_group();
    exit_event_.notify();
}

void Worker::signal(int sig) const
{
    if (exited_ || pid_ <= 0)
        return;
    if (::kill(-pid_, sig) != 0)
        ::kill(pid_, sig);
}

void Worker::kill_group() const
{
    if (pid_ > 0)
        ::kill(-pid_, SIGKILL); // ESRCH when the group is empty: nothing to do
}

awaitable<bool> wait_exit(WorkerPtr w, std::chrono::milliseconds limit)
{
    if (w->exited())
        co_return true;
    co_await w->exit_event().wait_for(limit);
    co_return w->exited();
}

awaitable<void> stop_worker(WorkerPtr w, std::chrono::steady_clock::time_point deadline,
                            std::shared_ptr<const Flag> pool_stopping)
{
    static const std::string stop =
        relay::encode_frame(relay::flag::control | relay::flag::codec_json, 0, {}, R"({"stop":true})");
    if (!w->exited())
        co_await w->channel().send(stop); // a worker that cannot take it is ended below
    auto left = std::max(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()),
        std::chrono::milliseconds(0));
    if (co_await wait_exit(w, left))
        co_return;
    if (pool_stopping->raised())
        co_return; // the pool's stop kills what is left at its deadline and says so
    log::warn("pool", w->tag() + " did not stop within destroy_timeout, sending SIGTERM");
    w->signal(SIGTERM);
    if (co_await wait_exit(w, std::chrono::milliseconds(2000)))
        co_return;
    log::warn("pool", w->tag() + " ignored SIGTERM, sending SIGKILL");
    w->signal(SIGKILL);
    co_await wait_exit(w, std::chrono::milliseconds(5000));
}

} // namespace ferry::pool
