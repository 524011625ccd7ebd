// How long a worker launch blocks the launching loop, against the server's resident memory: ferry's launch
// (clone with CLONE_VM | CLONE_VFORK, pool/src/launch.cpp) side by side with fork + exec as Boost.Process
// v2's default launcher does it (fork, the child execs, the parent waits on a close-on-exec pipe for the
// exec). Built as build/ferry_launch_bench; bench/README.md, "Launching workers".
//   build/ferry_launch_bench [MiB ...]     default: 8 256 1024; LAUNCHES=30 per size and method
// For each size the process first makes that much memory resident; a second thread writes one byte per page
// in a loop meanwhile (another event loop at work), and its pages written per millisecond are reported: a
// fork write-protects the whole address space, so that thread then faults on every page again.
#include "launch.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace ferry::pool::detail;
using clock_type = std::chrono::steady_clock;

namespace {

extern "C" char **environ;

// What Boost.Process v2's default_launcher does, reduced to the part that blocks the caller.
int fork_exec(const char *exe)
{
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = ::fork();
    if (pid == 0) {
        char *argv[] = {const_cast<char *>(exe), nullptr};
        ::execve(exe, argv, environ);
        int e = errno;
        (void)!::write(p[1], &e, sizeof e);
        ::_exit(127);
    }
    ::close(p[1]);
    int e = 0;
    while (::read(p[0], &e, sizeof e) < 0 && errno == EINTR) {
    }
    ::close(p[0]);
    return pid;
}

struct Figures {
    double mean_ms = 0, max_ms = 0, writer_pages_per_ms = 0;
};

Figures measure(bool use_fork, char *mem, std::size_t bytes, int launches)
{
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::atomic<bool> stop{false};
    std::atomic<long> written{0};
    std::thread writer([&] {
        std::size_t i = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            mem[i] = static_cast<char>(mem[i] + 1);
            i = (i + page) % bytes;
            written.fetch_add(1, std::memory_order_relaxed);
        }
    });
    auto env = build_environment({});
    boost::asio::io_context io;
    Figures f;
    auto start = clock_type::now();
    long written_at_start = written.load();
    for (int i = 0; i < launches; ++i) {
        boost::asio::writable_pipe in(io);
        boost::asio::readable_pipe out(io), err(io);
        auto t0 = clock_type::now();
        int pid = -1;
        if (use_fork) {
            pid = fork_exec("/bin/true");
        } else {
            auto r = launch("/bin/true", std::vector<std::string>{}, env, in, out, err);
            pid = r ? *r : -1;
        }
        double ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        if (pid < 0) {
            std::fprintf(stderr, "launch failed\n");
            std::exit(1);
        }
        f.mean_ms += ms / launches;
        f.max_ms = std::max(f.max_ms, ms);
        ::waitpid(pid, nullptr, 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    double total_ms = std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
    f.writer_pages_per_ms = static_cast<double>(written.load() - written_at_start) / total_ms;
    stop = true;
    writer.join();
    return f;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<std::size_t> sizes;
    for (int i = 1; i < argc; ++i)
        sizes.push_back(std::strtoul(argv[i], nullptr, 10));
    if (sizes.empty())
        sizes = {8, 256, 1024};
    const char *n = std::getenv("LAUNCHES");
    int launches = n ? std::atoi(n) : 30;
    std::printf("| resident MiB | ferry launch: mean / max ms | fork + exec: mean / max ms | ratio (mean) | "
                "writer thread, pages/ms: ferry / fork |\n|---:|---:|---:|---:|---:|\n");
    for (std::size_t mib : sizes) {
        std::size_t bytes = mib << 20;
        auto *mem = static_cast<char *>(
            ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (mem == MAP_FAILED) {
            std::perror("mmap");
            return 1;
        }
        std::memset(mem, 1, bytes);
        Figures ours = measure(false, mem, bytes, launches), forked = measure(true, mem, bytes, launches);
        std::printf("| %zu | %.2f / %.2f | %.2f / %.2f | %.2f× | %.0f / %.0f |\n", mib, ours.mean_ms,
                    ours.max_ms, forked.mean_ms, forked.max_ms, ours.mean_ms / forked.mean_ms,
                    ours.writer_pages_per_ms, forked.writer_pages_per_ms);
        std::fflush(stdout);
        ::munmap(mem, bytes);
    }
}
