#include "spawner.hpp"

#include "affinity.hpp"
#include "ferry/relay/frame.hpp"
#include "ferry/version.hpp"
#include "launch.hpp"
#include "prefork_file.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <string_view>
#include <sys/socket.h>
#include <unistd.h>

namespace ferry::pool {

Spawner::Spawner(asio::io_context &io, const Options &opt, const Host &host, const Flag &stopping,
                 BootReport &report)
    : io_(io), opt_(opt), host_(host), stopping_(stopping), report_(report)
{
}

Result<void> Spawner::prepare()
{
    std::string name = opt_.command.empty() ? std::string() : opt_.command[0];
    exe_ = detail::find_executable(name);
    if (exe_.empty())
        return fail("server.command: \"" + name + "\" not found in PATH");
    args_.assign(opt_.command.begin() + 1, opt_.command.end());
    std::vector<std::string> extra = {"RR_RELAY=pipes", "RR_MODE=" + opt_.mode, "RR_VERSION=2023.3.0",
                                      std::string("FERRY_VERSION=") + ferry::version};
    extra.insert(extra.end(), opt_.env.begin(), opt_.env.end());
    env_ = detail::build_environment(extra);
    return {};
}

namespace {
// The wait before the next spawn after `failures` boot failures in a row: 100 ms, doubling up to 12.8 s.
std::chrono::milliseconds back_off_delay(unsigned failures)
{
    return failures == 0 ? std::chrono::milliseconds(0)
                         : std::chrono::milliseconds(100) * (1u << std::min(failures - 1, 7u));
}

constexpr std::size_t boot_lines_max = 64;
// What the remembered lines may hold together: a worker printing long lines at boot (up to 16 KiB each) does
// not make the pool keep 1 MiB; lines past it are logged every time.
constexpr std::size_t boot_lines_bytes_max = 64 * 1024;
} // namespace

awaitable<void> Spawner::back_off()
{
    using std::chrono::steady_clock;
    const auto until = steady_clock::now() + back_off_delay(failures_);
    // A stop does not wait for it, and a worker that boots meanwhile ends it: the app boots again (polled
    // every 100 ms; the workers still waiting then start together).
    const std::uint64_t recoveries = report_.recoveries(); // another loop's worker booting ends it too
    while (failures_ > 0 && !stopping_.raised() && steady_clock::now() < until &&
           report_.recoveries() == recoveries)
        co_await stopping_.wait_until(std::min(until, steady_clock::now() + std::chrono::milliseconds(100)));
}

void Spawner::booted()
{
    failures_ = 0;
    last_error_.clear();
    report_.booted();
}

std::string Spawner::report_failure()
{
    return report_.failure(last_error_, back_off_delay(failures_));
}

std::string BootReport::failure(const std::string &message, std::chrono::milliseconds step)
{
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    ++in_a_row_;
    if (in_a_row_ > 1 && now < quiet_until_) {
        ++unreported_;
        return {};
    }
    quiet_until_ = now + step; // the step's other failures (the workers that boot together fail together)
    std::string line = message;
    if (in_a_row_ > 1)
        line += " [" + std::to_string(in_a_row_) + " boot failures in a row" +
                (unreported_ ? ", " + std::to_string(unreported_) + " not reported since the last" : "") +
                "]";
    unreported_ = 0;
    return line;
}

bool BootReport::line_repeated(std::string_view line)
{
    std::lock_guard lock(mu_);
    if (std::find(lines_.begin(), lines_.end(), line) != lines_.end())
        return true;
    if (lines_.size() < boot_lines_max && lines_bytes_ + line.size() <= boot_lines_bytes_max) {
        lines_.emplace_back(line);
        lines_bytes_ += line.size();
    }
    return false;
}

void BootReport::booted()
{
    std::lock_guard lock(mu_);
    if (in_a_row_ > 0)
        recoveries_.fetch_add(1, std::memory_order_relaxed);
    quiet_until_ = {};
    in_a_row_ = unreported_ = 0;
    lines_.clear();
    lines_bytes_ = 0;
}

std::string Spawner::command_line() const
{
    std::string out;
    for (const auto &arg : opt_.command) {
        if (!out.empty())
            out += ' ';
        const bool quote = arg.empty() || arg.find_first_of(" \t\"'\\$") != std::string::npos;
        out += quote ? "'" + arg + "'" : arg;
    }
    return out;
}

Result<WorkerPtr> Spawner::launch(unsigned home)
{
    auto w = std::make_shared<Worker>(io_, opt_.max_frame_payload);
    auto pid = detail::launch(exe_, args_, env_, w->channel().stdin_pipe(), w->channel().stdout_pipe(),
                              w->err(), -1, inherit());
    if (!pid)
        return pid.error();
    w->launched(*pid, home);
    return w;
}

Result<int> Spawner::launch_on(int in_fd, int out_fd, int err_fd) const
{
    return detail::launch(exe_, args_, env_, in_fd, out_fd, err_fd, inherit());
}

bool detail::is_php_cli(const std::string &exe)
{
    static const std::regex php_cli(R"(php[0-9.]*(-cli)?)");
    return std::regex_match(exe.substr(exe.rfind('/') + 1), php_cli); // npos + 1 = 0: the whole name
}

bool Spawner::php_level_possible() const
{
    return detail::is_php_cli(exe_);
}

Result<WorkerPtr> Spawner::launch_template(bool php_level)
{
    std::vector<std::string> args;
    if (php_level) {
        const detail::PreforkFile &file = host_.prefork_file();
        if (!file.error.empty())
            return fail("cannot write the PHP-level fork template: " + file.error);
        args = {"-d", "auto_prepend_file=" + file.path};
    }
    args.insert(args.end(), args_.begin(), args_.end());
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return fail(std::string("cannot create the fork template's socket: ") + std::strerror(errno));
    auto w = std::make_shared<Worker>(io_, opt_.max_frame_payload, sv[0]); // a template: its socket
    ::fcntl(sv[0], F_SETFL, ::fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    auto pid = detail::launch(exe_, args, env_, w->channel().stdin_pipe(), w->channel().stdout_pipe(),
                              w->err(), sv[1], inherit());
    ::close(sv[1]);
    if (!pid)
        return pid.error();
    w->launched(*pid, 0); // the template lives on the pool's first loop
    return w;
}

awaitable<Result<void>> Spawner::handshake(WorkerPtr w, bool as_template)
{
    relay::Channel &ch = w->channel();
    ch.begin_exchange();
    ch.arm(opt_.boot_timeout);
    std::string hello = relay::encode_frame(relay::flag::control | relay::flag::codec_json, 0, {},
                                            "{\"pid\":" + std::to_string(::getpid()) +
                                                (as_template ? ",\"template\":true}" : "}"));
    if (!co_await ch.send(hello)) {
        ch.disarm();
        co_return fail("it closed its stdin before the handshake");
    }
    auto frame = co_await ch.next_frame();
    ch.disarm();
    if (!frame) {
        if (ch.error_kind() == relay::ChannelError::timed_out)
            co_return fail("no PID handshake within " + std::to_string(opt_.boot_timeout.count()) + " ms");
        co_return frame.error();
    }
    const relay::FrameHeader h = frame->header;
    std::string reply(frame->payload);
    if (auto end = ch.end_exchange(); !end)
        co_return fail("it wrote more than the handshake reply: " + end.error().message);
    if (h.flags & relay::flag::error)
        co_return fail("it answered the handshake with an error: " + reply);
    if (!(h.flags & relay::flag::control))
        co_return fail("its first frame was not a control frame (flags " + std::to_string(h.flags) + ")");
    error_code ec;
    auto v = boost::json::parse(reply, ec);
    if (ec || !v.is_object() || !v.as_object().contains("pid"))
        co_return fail("bad PID handshake reply: \"" + relay::printable(reply) + "\"");
    const auto &obj = v.as_object();
    const auto &pidv = obj.at("pid");
    if (!pidv.is_int64() || pidv.as_int64() <= 0)
        co_return fail("bad PID handshake reply: \"" + relay::printable(reply) + "\"");
    if (auto c = obj.if_contains("codec"); c && c->is_string() && c->as_string() == "msgpack")
        w->speaks(relay::Codec::msgpack);
    if (as_template) {
        auto t = obj.if_contains("template");
        const bool ok = t && t->is_bool() && t->as_bool();
        std::string why_not;
        if (!ok) {
            auto why = obj.if_contains("why");
            why_not = why && why->is_string()
                          ? relay::printable(std::string_view(why->as_string()), 300)
                          : std::string("it does not speak Ferry's fork protocol (use php-worker/)");
        }
        w->answered_template(ok, t != nullptr, std::move(why_not));
    }
    co_return Result<void>{};
}

std::string Spawner::boot_failure(const Worker &w, const std::string &error, const std::string &command)
{
    std::string msg =
        w.tag() + " failed to boot" + (command.empty() ? "" : " (command: " + command + ")") + ": " + error;
    if (w.exited())
        msg += " (" + describe_status(w.wait_status()) + ")";
    std::string tail = w.stderr_tail();
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r'))
        tail.pop_back();
    if (!tail.empty())
        msg += "; its stderr: " + tail;
    return msg;
}

} // namespace ferry::pool
