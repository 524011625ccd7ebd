// What issue 41 item 3 adds to each request, timed alone: a read() on the worker's (quiet) stdout that
// returns EAGAIN (Channel::claim) and an ioctl(FIONREAD) on its stdin at the reply (Channel::request_unread).
// Build and run: g++ -O2 -o /tmp/pipe_checks bench/pipe_checks.cpp && /tmp/pipe_checks
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main()
{
    int p[2];
    if (::pipe2(p, O_NONBLOCK) != 0)
        return 1;
    static char buf[16384];
    int queued = 0;
    constexpr int n = 2'000'000;
    using clock = std::chrono::steady_clock;
    auto t0 = clock::now();
    for (int i = 0; i < n; ++i)
        if (::read(p[0], buf, sizeof buf) > 0)
            return 1;
    auto t1 = clock::now();
    for (int i = 0; i < n; ++i)
        ::ioctl(p[1], FIONREAD, &queued);
    auto t2 = clock::now();
    auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count() / n; };
    std::printf("read() EAGAIN %.3f us, ioctl(FIONREAD) %.3f us per call\n", us(t1 - t0), us(t2 - t1));
}
