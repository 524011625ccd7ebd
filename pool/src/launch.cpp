#include "launch.hpp"

#include "process_shim.hpp"

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <linux/close_range.h>
#include <map>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

namespace bp = boost::process::v2;

namespace ferry::pool::detail {
namespace {

// Runs in the child between fork and exec (docs/architecture.md, "Workers", Boost.Process traps 3 and 5).
struct child_setup {
    pid_t parent;
    int extra_fd = -1; // becomes fd 3 (a fork template's control socket)

    bp::error_code on_exec_setup(bp::posix::default_launcher &, const bp::filesystem::path &,
                                 const char *const *)
    {
        ::setpgid(0, 0);                    // own process group: a terminal's Ctrl-C goes to the server only
        ::prctl(PR_SET_PDEATHSIG, SIGKILL); // SIGKILL: a worker ignoring SIGTERM must not outlive us
        if (::getppid() != parent)
            ::_exit(127); // the server died before prctl
        // Asio's signal handling and SIGPIPE=SIG_IGN must not leak into PHP.
        sigset_t all;
        sigemptyset(&all);
        ::sigprocmask(SIG_SETMASK, &all, nullptr);
        for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGCHLD, SIGHUP, SIGQUIT})
            ::signal(sig, SIG_DFL);
        // Boost.Process closes no inherited fd by itself on every kernel: the listening socket, client
        // connections and other workers' pipes must not reach PHP.
        ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
        if (extra_fd == 3)
            ::fcntl(3, F_SETFD, 0);
        else if (extra_fd >= 0 && ::dup2(extra_fd, 3) != 3)
            ::_exit(127);
        return {};
    }

    template <typename... A> void on_exec_error(A &&...)
    {
        ::_exit(127); // the launcher would call exit(), running the server's atexit handlers in the child
    }
};

} // namespace

std::string find_executable(const std::string &name)
{
    if (name.empty())
        return {};
    if (name.find('/') != std::string::npos)
        return name;
    const char *path = std::getenv("PATH");
    std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= p.size()) {
        std::size_t end = p.find(':', start);
        if (end == std::string::npos)
            end = p.size();
        std::string dir = p.substr(start, end - start);
        if (dir.empty())
            dir = ".";
        std::string candidate = dir + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        start = end + 1;
    }
    return {};
}

std::vector<std::string> build_environment(const std::vector<std::string> &extra)
{
    std::vector<std::string> out;
    std::map<std::string, std::size_t> index;
    auto put = [&](std::string kv) {
        std::string key = kv.substr(0, kv.find('='));
        auto it = index.find(key);
        if (it != index.end()) {
            out[it->second] = std::move(kv);
        } else {
            index.emplace(key, out.size());
            out.push_back(std::move(kv));
        }
    };
    for (char **e = environ; e && *e; ++e)
        put(*e);
    for (const auto &kv : extra)
        put(kv);
    return out;
}

Result<int> launch(const std::string &exe, const std::vector<std::string> &args,
                   const std::vector<std::string> &env, boost::asio::writable_pipe &in,
                   boost::asio::readable_pipe &out, boost::asio::readable_pipe &err, int extra_fd)
{
    // The launcher calls notify_fork() on its executor's context around fork(). On the server's context that
    // means re-registering every descriptor in the child (epoll) or cancelling and restarting every pending
    // operation (io_uring) for each spawn. The child only execs, so a private, idle context takes the calls;
    // the pipes stay bound to `io`.
    static boost::asio::io_context fork_context;
    bp::error_code ec;
    auto proc = bp::default_process_launcher()(
        fork_context.get_executor(), ec, bp::filesystem::path(exe), args, bp::process_stdio{in, out, err},
        bp::process_environment{env}, child_setup{::getpid(), extra_fd});
    if (ec)
        return fail("cannot start " + exe + ": " + ec.message());
    int pid = proc.id();
    // The pool writes request frames with a direct writev(2) first (write_all_fast): never block the loop.
    int fd = in.native_handle();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    proc.detach(); // the pool reaps its children itself (one SIGCHLD handler)
    return pid;
}

Result<int> launch(const std::string &exe, const std::vector<std::string> &args,
                   const std::vector<std::string> &env, int in_fd, int out_fd, int err_fd)
{
    static boost::asio::io_context fork_context; // as above
    bp::error_code ec;
    auto proc = bp::default_process_launcher()(fork_context.get_executor(), ec, bp::filesystem::path(exe),
                                               args, bp::process_stdio{in_fd, out_fd, err_fd},
                                               bp::process_environment{env}, child_setup{::getpid()});
    if (ec)
        return fail("cannot start " + exe + ": " + ec.message());
    int pid = proc.id();
    proc.detach();
    return pid;
}

} // namespace ferry::pool::detail
