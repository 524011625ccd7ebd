#include "launch.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <map>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace ferry::pool::detail {
namespace {

// What the child needs, built by the parent before the clone: the child allocates nothing.
struct Spawn {
    const char *exe;
    char *const *argv;
    char *const *envp;
    int fds[4];   // become the child's 0, 1, 2 and (when >= 0) 3
    pid_t parent; // the server, whose death kills the child (PR_SET_PDEATHSIG)
    int error;    // set by the child when it cannot exec: the errno
    // Every CPU the server may use, once its loops are pinned (CpuPins::spawn_affinity()): the child must not
    // inherit the launching loop's CPUs. nullptr: it inherits them (they are all of them).
    const cpu_set_t *affinity;
    // The soft RLIMIT_NOFILE the server started with, when it raised its own (Inherit::nofile); rlim_cur 0:
    // the child keeps the server's.
    rlimit64 nofile; // prlimit64(2) takes 64-bit fields on every architecture
};

// The kernel's struct sigaction, zeroed: SIG_DFL with no flags and an empty mask on every architecture.
struct KernelSigaction {
    unsigned long words[4];
};

// The child, from clone(CLONE_VM | CLONE_VFORK) until its exec (docs/architecture.md, "Workers"). It runs on
// its own stack but in the server's memory, with the launching thread suspended until the exec: so raw system
// calls only (no libc state, no errno worth reading, no allocation, no lock) and no sanitizer hooks (their
// state is the server's). Every signal is blocked on entry (the parent blocked them for the clone): no
// handler of the server's may run here, so every disposition goes back to SIG_DFL before they are unblocked.
__attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined)) int child_main(void *arg)
{
    Spawn *s = static_cast<Spawn *>(arg);
    long r = 0;
    KernelSigaction dfl{};
    for (long sig = 1; sig <= 64; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP)
            ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, 8L);
    ::syscall(SYS_setpgid, 0L, 0L); // own process group: a terminal's Ctrl-C goes to the server only
    // SIGKILL: a worker ignoring SIGTERM must not outlive us
    ::syscall(SYS_prctl, (long)PR_SET_PDEATHSIG, (long)SIGKILL);
    if (::syscall(SYS_getppid) != s->parent)
        goto out;               // the server died before prctl
    if (s->affinity != nullptr) // best effort: where it runs until it is pinned, if ever
        ::syscall(SYS_sched_setaffinity, 0L, (long)sizeof(cpu_set_t), s->affinity);
    if (s->nofile.rlim_cur != 0) // best effort: PHP's select() users want descriptors below 1024
        ::syscall(SYS_prlimit64, 0L, (long)RLIMIT_NOFILE, &s->nofile, nullptr);
    // Nothing of the server's reaches PHP (the listening socket, client connections, other workers' pipes):
    // every inherited descriptor from 3 up closes at the exec, then the child's own are put in place.
    ::syscall(SYS_close_range, 3U, ~0U, (unsigned)CLOSE_RANGE_CLOEXEC);
    for (int i = 0; i < 4; ++i)
        if (s->fds[i] >= 0 && s->fds[i] < 4) { // out of the way of the targets 0-3 first
            r = ::syscall(SYS_fcntl, (long)s->fds[i], (long)F_DUPFD_CLOEXEC, 4L);
            if (r < 0)
                goto fail;
            s->fds[i] = static_cast<int>(r);
        }
    for (int i = 0; i < 4; ++i)
        if (s->fds[i] >= 0 && (r = ::syscall(SYS_dup3, (long)s->fds[i], (long)i, 0L)) < 0)
            goto fail;
    {
        unsigned long none = 0;
        ::syscall(SYS_rt_sigprocmask, (long)SIG_SETMASK, &none, nullptr, 8L);
    }
    r = ::syscall(SYS_execve, s->exe, s->argv, s->envp);
fail:
    // syscall() returned -1 and set errno: the suspended thread's (the child runs on its TLS).
    s->error = errno != 0 ? errno : EINVAL;
out:
    ::syscall(SYS_exit, 127L);
    return 127;
}

constexpr std::size_t child_stack_size = 64 * 1024;

using CloneFn = int (*)(int (*)(void *), void *, int, void *, ...);

// libc's clone. ThreadSanitizer's interceptor of clone() treats every clone as a fork: it runs its
// fork-child bookkeeping in the child, which with CLONE_VM rewrites the server's own TSan state (false data
// races on every later cross-loop post). Under TSan the launch calls libc's clone itself; the child runs no
// instrumented code.
CloneFn real_clone()
{
#if defined(__SANITIZE_THREAD__)
    static CloneFn fn = [] {
        void *libc = ::dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
        void *sym = libc ? ::dlsym(libc, "clone") : nullptr;
        return sym ? reinterpret_cast<CloneFn>(sym) : static_cast<CloneFn>(::clone);
    }();
    return fn;
#else
    return ::clone;
#endif
}

// Starts `exe` on `fds` (0, 1, 2, and 3 when fds[3] >= 0). The launching thread is suspended from the clone
// to the child's exec, which is all the waiting a launch does: the child runs at once on the same CPU, and
// nothing of the server's address space is copied (a fork copies the page tables and write-protects every
// page, so each later write by any loop faults: bench/launch.cpp measured fork+exec holding the launching
// loop 2.2 ms at 8 MiB of RSS, 21 ms at 256 MiB and 52 ms at 1 GiB, against 0.4-0.6 ms for this launch).
Result<int> spawn(const std::string &exe, const std::vector<std::string> &args,
                  const std::vector<std::string> &env, const int (&fds)[4], const Inherit &inherit)
{
    std::vector<char *> argv;
    argv.reserve(args.size() + 2);
    argv.push_back(const_cast<char *>(exe.c_str()));
    for (const auto &a : args)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char *> envp;
    envp.reserve(env.size() + 1);
    for (const auto &e : env)
        envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);
    Spawn s{exe.c_str(), argv.data(), envp.data(),      {fds[0], fds[1], fds[2], fds[3]},
            ::getpid(),  0,           inherit.affinity, {}};
    if (inherit.nofile != 0) {
        ::getrlimit64(RLIMIT_NOFILE, &s.nofile);
        s.nofile.rlim_cur = static_cast<rlim64_t>(inherit.nofile);
    }

    void *stack = ::mmap(nullptr, child_stack_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return fail("cannot start " + exe + ": no memory for its launch: " + std::strerror(errno));
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = real_clone()(child_main, static_cast<char *>(stack) + child_stack_size,
                             CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
    int clone_errno = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::munmap(stack, child_stack_size);
    if (pid < 0)
        return fail("cannot start " + exe + ": " + std::strerror(clone_errno));
    if (s.error != 0) {
        // It is exiting (127; the parent wakes as it leaves its memory): reaped here, so that no exit of a
        // pid nobody owns reaches the pool's reaper (it would keep it among the unclaimed ones).
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR)
            ;
        return fail("cannot start " + exe + ": " + std::strerror(s.error));
    }
    return pid;
}

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
        // An empty entry is the current directory (GCC 12 warns falsely, -Wrestrict, on dir = "." here).
        std::string candidate =
            (end > start ? p.substr(start, end - start) : std::string(1, '.')) + "/" + name;
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
                   boost::asio::readable_pipe &out, boost::asio::readable_pipe &err, int extra_fd,
                   const Inherit &inherit)
{
    int p[3][2]; // stdin, stdout, stderr: {read end, write end}
    for (int i = 0; i < 3; ++i)
        if (::pipe2(p[i], O_CLOEXEC) != 0) {
            std::string why = std::strerror(errno);
            for (int j = 0; j < i; ++j)
                ::close(p[j][0]), ::close(p[j][1]);
            return fail("cannot start " + exe + ": cannot create its pipes: " + why);
        }
    auto pid = spawn(exe, args, env, {p[0][0], p[1][1], p[2][1], extra_fd}, inherit);
    ::close(p[0][0]);
    ::close(p[1][1]);
    ::close(p[2][1]);
    if (!pid) {
        ::close(p[0][1]);
        ::close(p[1][0]);
        ::close(p[2][0]);
        return pid.error();
    }
    // The pool writes request frames with a direct writev(2) first (write_all_fast): never block the loop.
    ::fcntl(p[0][1], F_SETFL, ::fcntl(p[0][1], F_GETFL) | O_NONBLOCK);
    in.assign(p[0][1]);
    out.assign(p[1][0]);
    err.assign(p[2][0]);
    return pid;
}

Result<int> launch(const std::string &exe, const std::vector<std::string> &args,
                   const std::vector<std::string> &env, int in_fd, int out_fd, int err_fd,
                   const Inherit &inherit)
{
    return spawn(exe, args, env, {in_fd, out_fd, err_fd, -1}, inherit);
}

} // namespace ferry::pool::detail
