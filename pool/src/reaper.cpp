#include "reaper.hpp"

#include "ferry/base/log.hpp"

#include <csignal>
#include <string>
#include <string_view>
#include <sys/wait.h>

namespace ferry::pool {

namespace {
constexpr std::size_t stderr_line_max = 16 * 1024; // a longer line is logged in pieces
} // namespace

Reaper::Reaper(asio::io_context &io, std::function<void(int pid, int status)> on_exit)
    : sigchld_(io, SIGCHLD), on_exit_(std::move(on_exit))
{
}

awaitable<void> Reaper::run(std::shared_ptr<Reaper> self)
{
    for (;;) {
        auto [ec, sig] = co_await self->sigchld_.async_wait(nothrow);
        if (ec == asio::error::operation_aborted)
            co_return;
        for (;;) {
            int status = 0;
            pid_t pid = ::waitpid(-1, &status, WNOHANG);
            if (pid <= 0)
                break;
            self->on_exit_(pid, status);
        }
    }
}

void Reaper::stop()
{
    error_code ignored;
    sigchld_.cancel(ignored);
}

awaitable<void> forward_stderr(WorkerPtr w, std::function<bool(std::string_view)> repeated_at_boot)
{
    std::string pending;
    char buf[4096];
    const std::string prefix = "pid " + std::to_string(w->pid()) + ": ";
    // What PHP prints while it boots (before its handshake) is often why it fails to, or a deprecation in the
    // app's boot: a warning. Afterwards the app's own stderr: info.
    auto emit = [&](std::string_view line) {
        if (w->state() == State::spawning) {
            if (repeated_at_boot && repeated_at_boot(line))
                log::debug("worker", prefix + std::string(line));
            else
                log::warn("worker", prefix + std::string(line));
        } else {
            log::info("worker", prefix + std::string(line));
        }
    };
    for (;;) {
        auto [ec, n] = co_await w->err().async_read_some(asio::buffer(buf), nothrow);
        if (ec)
            break;
        pending.append(buf, n);
        w->keep_stderr(std::string_view(buf, n));
        std::size_t start = 0;
        for (;;) {
            std::size_t nl = pending.find('\n', start);
            if (nl == std::string::npos)
                break;
            std::string_view line(pending.data() + start, nl - start);
            if (!line.empty() && line.back() == '\r')
                line.remove_suffix(1);
            emit(line);
            start = nl + 1;
        }
        pending.erase(0, start);
        if (pending.size() > stderr_line_max) {
            emit(pending);
            pending.clear();
        }
    }
    if (!pending.empty())
        emit(pending);
}

} // namespace ferry::pool
