#include "fork_template.hpp"

#include "ferry/base/log.hpp"
#include "ferry/relay/frame.hpp"
#include "reaper.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

namespace ferry::pool {

namespace {
constexpr auto fork_answer_timeout = std::chrono::milliseconds(10000);

// The parent pid of `pid` from /proc (0 when it is gone).
int parent_of(int pid)
{
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line))
        return 0;
    auto close = line.rfind(')');
    if (close == std::string::npos || close + 4 >= line.size())
        return 0;
    std::istringstream rest(line.substr(close + 2)); // "S 1234 ..."
    std::string state;
    int ppid = 0;
    rest >> state >> ppid;
    return ppid;
}

// sendmsg() of `data` with three descriptors attached. A plain function: the control buffer must be aligned
// for cmsghdr, which a coroutine frame does not guarantee (GCC 12; UBSan saw it misaligned).
ssize_t send_with_fds(int sock, const std::string &data, std::array<int, 3> fds)
{
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 3)] = {};
    iovec iov{const_cast<char *>(data.data()), data.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * 3);
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * 3);
    ssize_t sent;
    do
        sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    return sent;
}

// A retired template exits at EOF; one that does not within `limit` is killed.
awaitable<void> end_within(WorkerPtr w, std::chrono::milliseconds limit)
{
    const bool exited = co_await wait_exit(w, limit);
    if (!exited)
        w->signal(SIGKILL);
    co_return;
}
} // namespace

void ForkTemplate::ChildEnds::close()
{
    for (int *fd : {&in, &out, &err})
        if (*fd >= 0) {
            ::close(*fd);
            *fd = -1;
        }
}

ForkTemplate::ForkTemplate(asio::io_context &io, const Options &opt, Spawner &spawner, const Flag &stopping,
                           std::function<std::optional<int>(int, bool)> track)
    : io_(io), opt_(opt), spawner_(spawner), stopping_(stopping), track_(std::move(track)),
      command_(
          relay::encode_frame(relay::flag::control | relay::flag::codec_json, 0, {},
                              opt.fork_fast_exit ? R"({"fork":true,"fast_exit":true})" : R"({"fork":true})")),
      turn_(io), php_level_(opt.fork == Fork::php)
{
}

awaitable<ForkTemplate::Forked> ForkTemplate::fork(ChildEnds ends, std::uint64_t gen)
{
    while (busy_)
        co_await turn_.wait_until(clock::time_point::max());
    busy_ = true;
    Forked out;
    auto pid = co_await fork_one(ends, gen, out);
    ends.close();
    busy_ = false;
    turn_.notify();
    if (pid)
        out.pid = *pid;
    else
        out.error = pid.error().message;
    co_return out;
}

awaitable<Result<int>> ForkTemplate::fork_one(ChildEnds &ends, std::uint64_t gen, Forked &out)
{
    if (stopping_.raised())
        co_return fail("the pool is stopping");
    if (auto ready = co_await ensure(gen, out.boot_failed); !ready)
        co_return ready.error();
    relay::Channel &ch = proc_->channel();
    // Output the template wrote while idle must not be read as this command's answer (Channel::claim()).
    if (!ch.claim()) {
        if (proc_->state() != State::stopping) // output while idle retired it already (on_unexpected)
            retire("its stdout is closed");
        co_return fail("the fork template broke the protocol");
    }
    // One message carries the command and the three descriptors (SCM_RIGHTS).
    ch.begin_exchange();
    out.sent = clock::now();
    const ssize_t sent = send_with_fds(proc_->control_fd(), command_, {ends.in, ends.out, ends.err});
    if (sent != static_cast<ssize_t>(command_.size())) {
        std::string why = sent < 0 ? std::strerror(errno) : "short write";
        retire("sending a fork command failed: " + why);
        co_return fail("the fork template is gone (" + why + ")");
    }
    ch.arm(std::min(opt_.boot_timeout,
                    fork_answer_timeout)); // a fork takes milliseconds: one that hangs is broken
    auto frame = co_await ch.next_frame();
    ch.disarm();
    if (!frame) {
        std::string why = frame.error().message;
        retire("no answer to a fork command: " + why);
        co_return fail("the fork template did not answer: " + why);
    }
    const auto flags = frame->header.flags;
    std::string reply(frame->payload);
    if (auto end = ch.end_exchange(); !end) {
        retire("it wrote more than its answer: " + end.error().message);
        co_return fail("the fork template broke the protocol");
    }
    if (flags & relay::flag::error)
        co_return fail("the fork template could not fork: " + relay::printable(reply));
    error_code ec;
    auto v = boost::json::parse(reply, ec);
    const boost::json::value *pidv = !ec && v.is_object() ? v.as_object().if_contains("pid") : nullptr;
    if (!pidv || !pidv->is_int64() || pidv->as_int64() <= 0) {
        retire("bad answer to a fork command: \"" + relay::printable(reply) + "\"");
        co_return fail("the fork template broke the protocol");
    }
    const int pid = static_cast<int>(pidv->as_int64());
    // The template answers once the middle process is gone, so the worker is our child by then. Any other pid
    // (a buggy or hostile template) is refused: it would be signalled as a worker, and it is not ours.
    if (parent_of(pid) != ::getpid()) {
        retire("it answered pid " + std::to_string(pid) + ", which is not a child of this server");
        co_return fail("the fork template broke the protocol");
    }
    if (!answered_)
        out.sent = clock::now();
    answered_ = true;
    co_return pid;
}

void ForkTemplate::renew(std::uint64_t gen)
{
    failures_ = 0;
    retry_at_ = {};
    if (gen > gen_ && proc_ && !proc_->exited() && proc_->state() == State::ready && !busy_)
        retire(""); // idle: end it now (a fork in progress renews it itself)
}

awaitable<Result<void>> ForkTemplate::ensure(std::uint64_t gen, bool &boot_failed)
{
    if (disabled_)
        co_return fail("forking is off: the worker cannot be a fork template");
    if (proc_ && !proc_->exited() && proc_->state() == State::ready && gen_ < gen)
        retire(""); // started before a reset: its code is old
    if (proc_ && !proc_->exited() && proc_->state() == State::ready)
        co_return Result<void>{};
    if (clock::now() < retry_at_)
        co_return fail("the fork template failed to start; starting workers without it for now");
    if (php_level_ && !spawner_.php_level_possible())
        co_return give_up("fork: php needs a command that starts php itself, not through a wrapper");
    for (;;) {
        auto launched = spawner_.launch_template(php_level_);
        if (!launched && php_level_) // prefork.php cannot be written (a $TMPDIR that is not writable)
            co_return give_up("cannot start a PHP-level template: " + launched.error().message);
        if (!launched) {
            retire(launched.error().message);
            co_return launched.error();
        }
        WorkerPtr w = *launched;
        if (proc_ && !proc_->exited())
            old_.push_back(proc_); // retired, its exit not reaped yet
        proc_ = w;
        answered_ = false;
        gen_ = gen;
        if (auto status = track_(w->pid(), true))
            on_exit(w->pid(), *status); // it ended before we recorded it
        asio::co_spawn(io_, forward_stderr(w), log_exceptions{"template stderr"});
        auto booted = co_await spawner_.handshake(w, true);
        if (!booted) {
            co_await wait_exit(w, std::chrono::milliseconds(200));
            std::string msg = Spawner::boot_failure(*w, booted.error().message, spawner_.command_line());
            // A PHP-level template: prefork.php itself failed (the worker script has not run), not the
            // worker's boot.
            if (php_level_)
                co_return give_up(msg);
            retire(msg, true); // the pool logs it as the worker's boot failure
            boot_failed = true;
            co_return fail(msg);
        }
        if (!w->template_ok() && !php_level_ && !w->knows_templates() && spawner_.php_level_possible()) {
            // Not Ferry's library (RoadRunner's packages, say): fork from PHP itself instead (§8.1). The
            // worker that answered serves nobody: it is killed.
            log::info("pool",
                      opt_.mode + ".pool.fork: " + w->tag() +
                          " is not Ferry's library; new workers are forked from a PHP-level template "
                          "instead (PHP started, the worker script not run yet; docs/protocol.md §8.1)");
            php_level_ = true;
            w->to(State::stopping);
            w->signal(SIGKILL);
            continue;
        }
        if (!w->template_ok()) {
            std::string why = w->not_template();
            if (php_level_ && !w->knows_templates())
                why = "the worker script answered, not prefork.php: does the command set auto_prepend_file "
                      "itself?";
            else if (!w->knows_templates())
                why += ", and the command does not start php itself, which a PHP-level template needs";
            co_return give_up(why);
        }
        break;
    }
    WorkerPtr w = proc_;
    w->to(State::ready);
    failures_ = 0;
    // Output from the template while no command is pending breaks the protocol: end it (the next fork
    // starts a new one).
    w->channel().on_unexpected =
        [weak = std::weak_ptr<ForkTemplate>(shared_from_this())](const std::string &what) {
            if (auto self = weak.lock())
                self->retire("it wrote " + what);
        };
    w->channel().watch();
    log::info("pool",
              w->tag() + (php_level_ ? " (PHP-level)" : "") + " ready: new workers are forked from it");
    co_return Result<void>{};
}

Result<void> ForkTemplate::give_up(const std::string &why)
{
    const bool tried = proc_ && !proc_->exited() && proc_->state() != State::stopping; // not the probe killed
    log::warn("pool", opt_.mode + ".pool.fork: " +
                          (tried ? proc_->tag() + " cannot be a fork template" : "no fork template") + " (" +
                          why + "); each worker is started on its own instead");
    disabled_ = true;
    if (tried)
        retire("");
    return fail("forking is off: " + why);
}

// After a template that failed (to start, or later): 1 s, doubling up to 32 s, before the next one is
// started. Meanwhile workers are started without it (each boots PHP), so nothing waits for a template.
void ForkTemplate::retire(const std::string &why, bool quiet)
{
    if (!why.empty()) {
        ++failures_;
        auto backoff = std::chrono::seconds(1) * (1u << std::min(failures_ - 1, 5u)); // 1 s .. 32 s
        retry_at_ = clock::now() + backoff;
        if (!quiet)
            log::error("pool", "fork template" +
                                   (proc_ ? " " + std::to_string(proc_->pid()) : std::string()) + ": " + why +
                                   "; new workers start without it for " + std::to_string(backoff.count()) +
                                   " s");
    }
    if (!proc_ || proc_->exited())
        return;
    proc_->to(State::stopping);
    if (why.empty() && proc_->control_fd() >= 0) {
        proc_->close_control(); // EOF on its socket: it exits by itself
        asio::co_spawn(io_, end_within(proc_, std::chrono::milliseconds(2000)),
                       log_exceptions{"template stop"});
        return;
    }
    proc_->signal(SIGKILL);
}

void ForkTemplate::on_exit(int pid, int status)
{
    WorkerPtr w;
    if (proc_ && proc_->pid() == pid) {
        w = proc_;
    } else {
        auto it =
            std::find_if(old_.begin(), old_.end(), [pid](const WorkerPtr &o) { return o->pid() == pid; });
        if (it == old_.end())
            return;
        w = *it;
        old_.erase(it);
    }
    track_(pid, false);
    bool expected = w->state() == State::stopping || stopping_.raised();
    if (!expected)
        log::warn("pool", w->tag() + " " + describe_status(status) + " unexpectedly");
    else
        log::debug("pool", w->tag() + " " + describe_status(status));
    w->to(State::dead);
    w->on_exit(status);
}

awaitable<void> ForkTemplate::stop(clock::time_point deadline)
{
    for (auto old = old_; auto &o : old) // retired ones end within 2 s by themselves
        co_await wait_exit(o, std::chrono::milliseconds(2500));
    WorkerPtr w = proc_;
    if (!w || w->exited())
        co_return;
    w->to(State::stopping);
    w->close_control(); // EOF on its socket: it exits
    auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                         std::chrono::milliseconds(100));
    if (co_await wait_exit(w, std::min(left, std::chrono::milliseconds(5000))))
        co_return;
    log::warn("pool", w->tag() + " did not exit at EOF: killing it");
    w->signal(SIGKILL);
    co_await wait_exit(w, std::chrono::milliseconds(1000));
}

void ForkTemplate::kill()
{
    for (auto &w : old_)
        w->signal(SIGKILL);
    if (proc_) {
        proc_->channel().abandon();
        proc_->signal(SIGKILL);
    }
}

} // namespace ferry::pool
