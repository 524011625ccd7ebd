#include "launch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace ferry::pool::detail;

namespace {

// fd → target of a process, from /proc/PID/fd.
std::map<int, std::string> open_fds(const std::string &proc_fd_dir)
{
    std::map<int, std::string> out;
    for (int fd = 0; fd < 1024; ++fd) {
        char target[512];
        std::string link = proc_fd_dir + "/" + std::to_string(fd);
        ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
        if (n > 0)
            out[fd] = std::string(target, static_cast<std::size_t>(n));
    }
    return out;
}

std::string target_of(int fd)
{
    return open_fds("/proc/self/fd").at(fd);
}

bool inheritable(int fd)
{
    return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0;
}

// Reads `fd` until `marker` arrives, EOF, or 10 s without a byte.
std::string read_until(int fd, const std::string &marker)
{
    std::string got;
    char buf[4096];
    while (got.find(marker) == std::string::npos) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 10000) <= 0)
            break;
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(n));
    }
    return got;
}

} // namespace

TEST(Launch, FindsExecutablesInPath)
{
    std::string php = find_executable("php");
    ASSERT_FALSE(php.empty());
    EXPECT_EQ(php.front(), '/');
    EXPECT_EQ(find_executable("/bin/sh"), "/bin/sh");
    EXPECT_EQ(find_executable("ferry-no-such-program-xyz"), "");
    EXPECT_EQ(find_executable(""), "");
}

TEST(Launch, EnvironmentEntriesReplaceInheritedOnes)
{
    ::setenv("FERRY_SPAWN_TEST", "old", 1);
    auto env = build_environment({"FERRY_SPAWN_TEST=new", "RR_MODE=http"});
    EXPECT_EQ(std::count(env.begin(), env.end(), "FERRY_SPAWN_TEST=new"), 1);
    EXPECT_EQ(std::count(env.begin(), env.end(), "FERRY_SPAWN_TEST=old"), 0);
    EXPECT_EQ(std::count(env.begin(), env.end(), "RR_MODE=http"), 1);
    EXPECT_NE(
        std::find_if(env.begin(), env.end(), [](const std::string &s) { return s.rfind("PATH=", 0) == 0; }),
        env.end());
}

// A worker holds no descriptor of the server's beyond its stdin, stdout and stderr (docs/architecture.md,
// "Workers", the launch): not the listening socket (a stopped server's port would stay taken), not
// a client connection (it would stay open), not another worker's pipes (EOF-based stop would break), not a
// file.
TEST(Launch, AWorkerInheritsNoDescriptorBeyondItsStdio)
{
    // What a server holds, all without O_CLOEXEC so that only the launch code can keep them from the child:
    // a listening socket, a connected socket pair, a pipe, a regular file, and one at a high number.
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener, 8), 0);
    int conn[2], pipe_fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, conn), 0);
    ASSERT_EQ(::pipe(pipe_fds), 0);
    char file_name[] = "/tmp/ferry-launch-test-XXXXXX";
    int file = ::mkstemp(file_name);
    ASSERT_GE(file, 0);
    int high = ::fcntl(pipe_fds[1], F_DUPFD, 200);
    ASSERT_GE(high, 200);
    const std::vector<int> held = {listener, conn[0], conn[1], pipe_fds[0], pipe_fds[1], file, high};
    std::map<std::string, int> server_targets; // "socket:[123]" → fd
    for (int fd : held) {
        ASSERT_TRUE(inheritable(fd)) << "fd " << fd;
        server_targets[target_of(fd)] = fd;
    }

    // fds.php reports what it has open on stderr, then waits for EOF on stdin.
    const std::string script = std::string(FERRY_SOURCE_DIR) + "/tests/php/fds.php";
    char resolved[PATH_MAX];
    ASSERT_NE(::realpath(script.c_str(), resolved), nullptr);
    boost::asio::io_context io;
    boost::asio::writable_pipe in(io);
    boost::asio::readable_pipe out(io), err(io);
    auto pid = launch(find_executable("php"), {script}, build_environment({}), in, out, err);
    ASSERT_TRUE(pid) << pid.error().message;
    std::string report = read_until(err.native_handle(), "end\n");
    auto outside = open_fds("/proc/" + std::to_string(*pid) + "/fd"); // while it waits on stdin
    in.close();                                                       // EOF: it exits
    int status = 0;
    ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    for (int fd : held)
        ::close(fd);
    ::unlink(file_name);

    ASSERT_NE(report.find("end\n"), std::string::npos) << report;
    std::map<int, std::string> inside;
    std::size_t start = 0;
    for (std::size_t nl; (nl = report.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string line = report.substr(start, nl - start);
        if (auto sp = line.find(' '); sp != std::string::npos)
            inside[std::stoi(line.substr(0, sp))] = line.substr(sp + 1);
    }
    // Beyond 0-2, only what PHP opens itself may be there:
    //  - the script it runs (the CLI keeps it open while it runs);
    //  - OPcache's lock file, an unlinked /tmp/.ZendSem.XXXXXX, when opcache.enable_cli is on;
    //  - in its own listing only, the directory handle scandir() read /proc/self/fd through, already closed
    //    when the script reads the targets (readlink fails: "?").
    auto own = [&](const std::string &target, bool listing) {
        return target == resolved || target.find("/.ZendSem.") != std::string::npos ||
               (listing && target == "?");
    };
    for (const auto &[fds, listing] : {std::pair{&inside, true}, std::pair{&outside, false}}) {
        const char *view = listing ? "the worker's own listing" : "/proc/PID/fd";
        for (int fd : {0, 1, 2}) {
            ASSERT_TRUE(fds->count(fd)) << view << ": fd " << fd << " missing";
            EXPECT_EQ(fds->at(fd).rfind("pipe:", 0), 0u) << view << ": fd " << fd << " is " << fds->at(fd);
            EXPECT_FALSE(server_targets.count(fds->at(fd))) << view << ": fd " << fd << " is the server's";
        }
        for (const auto &[fd, target] : *fds) {
            if (fd <= 2)
                continue;
            EXPECT_FALSE(server_targets.count(target)) << view << ": fd " << fd << " is the server's fd "
                                                       << server_targets[target] << " (" << target << ")";
            EXPECT_TRUE(own(target, listing)) << view << ": fd " << fd << " inherited: " << target;
        }
    }
    EXPECT_LE(std::count_if(inside.begin(), inside.end(), [](const auto &e) { return e.second == "?"; }), 1);
}

namespace {

long minor_faults()
{
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    return r.ru_minflt;
}

std::size_t open_fd_count()
{
    return open_fds("/proc/self/fd").size();
}

// The value of a "Key:\t..." line of /proc/PID/status text.
std::string status_field(const std::string &status, const std::string &key)
{
    auto at = status.find("\n" + key + ":");
    if (at == std::string::npos)
        return "(no " + key + ")";
    at = status.find_first_not_of(" \t", at + key.size() + 2);
    return status.substr(at, status.find('\n', at) - at);
}

void record_usr1(int) {}

} // namespace

// A launch does not copy the server's address space (docs/architecture.md, "Workers"): a fork write-protected
// every page of it, so each later write by any loop took a fault (and the fork itself copied the page tables,
// ~10 ms of a blocked loop at 256 MiB of RSS, bench/launch.cpp). Counted in faults, not time: 16384 pages
// written after the launch fault once each after a fork, and not at all after this launch.
TEST(Launch, DoesNotWriteProtectTheServersMemory)
{
    const std::size_t size = 64u << 20, page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void *mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto *bytes = static_cast<volatile char *>(mem);
    for (std::size_t i = 0; i < size; i += page)
        bytes[i] = 1; // resident, so that a fork would have to share it
    boost::asio::io_context io;
    boost::asio::writable_pipe in(io);
    boost::asio::readable_pipe out(io), err(io);
    auto pid = launch("/bin/true", std::vector<std::string>{}, build_environment({}), in, out, err);
    ASSERT_TRUE(pid) << pid.error().message;
    long before = minor_faults();
    for (std::size_t i = 0; i < size; i += page)
        bytes[i] = 2;
    long faults = minor_faults() - before;
    int status = 0;
    ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    ::munmap(mem, size);
    EXPECT_LT(faults, static_cast<long>(size / page / 16))
        << faults << " faults writing " << size / page << " pages";
}

// A worker starts with default signal dispositions, nothing blocked, in its own process group, whatever the
// server has installed (handlers, ignored signals, a blocked mask on the launching thread), and the server's
// own signal state is as it was.
TEST(Launch, AWorkerGetsDefaultSignalsAndItsOwnProcessGroupAndTheServerKeepsItsOwn)
{
    struct sigaction usr1 {
    }, old_usr1{}, ign{}, old_pipe{}, old_hup{};
    usr1.sa_handler = record_usr1;
    ::sigemptyset(&usr1.sa_mask);
    ign.sa_handler = SIG_IGN;
    ::sigemptyset(&ign.sa_mask);
    ASSERT_EQ(::sigaction(SIGUSR1, &usr1, &old_usr1), 0);
    ASSERT_EQ(::sigaction(SIGPIPE, &ign, &old_pipe), 0);
    ASSERT_EQ(::sigaction(SIGHUP, &ign, &old_hup), 0);
    sigset_t usr2, old_mask;
    ::sigemptyset(&usr2);
    ::sigaddset(&usr2, SIGUSR2);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &usr2, &old_mask), 0);

    boost::asio::io_context io;
    boost::asio::writable_pipe in(io);
    boost::asio::readable_pipe out(io), err(io);
    auto pid = launch("/bin/cat", std::vector<std::string>{"/proc/self/status"}, build_environment({}), in,
                      out, err);

    sigset_t now_mask;
    ::pthread_sigmask(SIG_SETMASK, &old_mask, &now_mask);
    struct sigaction now_usr1 {
    }, now_pipe{};
    ::sigaction(SIGUSR1, &old_usr1, &now_usr1);
    ::sigaction(SIGPIPE, &old_pipe, &now_pipe);
    ::sigaction(SIGHUP, &old_hup, nullptr);
    ASSERT_TRUE(pid) << pid.error().message;
    std::string status = read_until(out.native_handle(), "\nvoluntary_ctxt_switches");
    int exit_status = 0;
    ASSERT_EQ(::waitpid(*pid, &exit_status, 0), *pid);

    EXPECT_EQ(status_field(status, "SigBlk"), "0000000000000000") << status;
    EXPECT_EQ(status_field(status, "SigIgn"), "0000000000000000") << status;
    EXPECT_EQ(status_field(status, "SigCgt"), "0000000000000000") << status;
    EXPECT_EQ(status_field(status, "NSpgid"), std::to_string(*pid)) << status;
    EXPECT_EQ(now_usr1.sa_handler, record_usr1);
    EXPECT_EQ(now_pipe.sa_handler, SIG_IGN);
    EXPECT_TRUE(::sigismember(&now_mask, SIGUSR2));
    EXPECT_FALSE(::sigismember(&now_mask, SIGTERM)); // the launch's own blocking of every signal is undone
}

// A command that cannot be executed is an error naming it and the reason, and leaves no descriptor behind.
TEST(Launch, AnExecFailureIsAnErrorNamingTheCommandAndLeaksNoDescriptor)
{
    char name[] = "/tmp/ferry-launch-noexec-XXXXXX";
    int fd = ::mkstemp(name);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "\x01\x02\x03\x04 not a program\n", 20), 20);
    ::close(fd);
    ::chmod(name, 0755);
    boost::asio::io_context io;
    boost::asio::readable_pipe first(io); // the context's own descriptors (epoll, its wake-up) open with it
    std::size_t fds_before = open_fd_count();
    for (const std::string &exe : {std::string(name), std::string("/tmp")}) {
        boost::asio::writable_pipe in(io);
        boost::asio::readable_pipe out(io), err(io);
        auto pid = launch(exe, std::vector<std::string>{}, build_environment({}), in, out, err);
        ASSERT_FALSE(pid) << exe << " started as " << *pid;
        EXPECT_NE(pid.error().message.find("cannot start " + exe + ": "), std::string::npos)
            << pid.error().message;
        EXPECT_NE(pid.error().message.find(exe == "/tmp" ? "Permission denied" : "Exec format error"),
                  std::string::npos)
            << pid.error().message;
        EXPECT_FALSE(in.is_open());
        EXPECT_FALSE(out.is_open());
        // The child that could not exec was reaped by the launch: nothing is left for a SIGCHLD reaper.
        errno = 0;
        EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << exe;
        EXPECT_EQ(errno, ECHILD) << exe;
    }
    ::unlink(name);
    EXPECT_EQ(open_fd_count(), fds_before);
}

// The descriptor limit the Host gives (Inherit::nofile) is the child's soft RLIMIT_NOFILE; its hard limit
// stays the server's. 0 leaves the server's.
TEST(Launch, TheChildStartsWithTheSoftDescriptorLimitItIsGiven)
{
    rlimit own{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &own), 0);
    ASSERT_GE(own.rlim_max, 200u);
    auto limits_of = [](std::uint64_t nofile) {
        boost::asio::io_context io;
        boost::asio::writable_pipe in(io);
        boost::asio::readable_pipe out(io), err(io);
        auto pid = launch("/bin/cat", std::vector<std::string>{"/proc/self/limits"}, build_environment({}),
                          in, out, err, -1, Inherit{nullptr, nofile});
        EXPECT_TRUE(pid) << pid.error().message;
        if (!pid)
            return std::string();
        std::string text = read_until(out.native_handle(), "Max realtime timeout");
        int status = 0;
        ::waitpid(*pid, &status, 0);
        auto at = text.find("Max open files");
        return at == std::string::npos ? text : text.substr(at, text.find('\n', at) - at);
    };
    const std::string hard = own.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(own.rlim_max);
    std::string given = limits_of(200);
    EXPECT_NE(given.find(" 200 "), std::string::npos) << given;
    EXPECT_NE(given.find(" " + hard + " "), std::string::npos) << given;
    std::string kept = limits_of(0);
    const std::string soft = own.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(own.rlim_cur);
    EXPECT_NE(kept.find(" " + soft + " "), std::string::npos) << kept;
}
