// The reply exec() gives (ferry/pool/pool.hpp, Reply), pulled by its caller: a stream with a 103 and a PING,
// one finished before its end (STOP, drained), bodies copied, handed over or held in the worker's buffer
// within the body budget, a request body read from a file.
#include "pool_test_util.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace ferry;
using namespace std::chrono_literals;
using namespace pool_test;

// The reply is pulled: the 103 first, then the stream chunk by chunk (the fifth asks for a PONG, sent when
// the sixth piece is asked for); finished early, the stream is stopped (STOP) and drained, not killed.
TEST(Pool, StreamsWithEarlyHintsPingAndStop)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("stream.php"));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        pool::Reply r;
        auto ctx = request("/x");
        co_await p.exec(ctx, {}, r);
        EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
        std::vector<int> informational;
        while (r.outcome == pool::Outcome::ok && r.informational()) {
            informational.push_back(r.response.status);
            co_await r.next();
        }
        EXPECT_EQ(informational, std::vector<int>{103});
        EXPECT_EQ(r.response.status, 200);
        EXPECT_TRUE(r.more()) << "a stream";
        EXPECT_TRUE(r.holds_worker()) << "the worker is the stream's until it ends";
        std::string body;
        int chunks = 0;
        for (;;) {
            body.append(r.body());
            ++chunks;
            if (!r.more())
                break;
            co_await r.next();
        }
        EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
        EXPECT_EQ(body, "one\ntwo\nthree\nfour\nfive\n");
        const int pid = r.worker_pid;
        r.finish();
        EXPECT_FALSE(r.holds_worker());

        pool::Reply quitter;
        auto ctx2 = request("/stream-long");
        co_await p.exec(ctx2, {}, quitter);
        for (int i = 0; i < 2 && quitter.more(); ++i)
            co_await quitter.next();
        EXPECT_TRUE(quitter.more()) << "50 chunks: more to come";
        EXPECT_EQ(quitter.body(), std::string(1024, 'c'));
        quitter.finish(); // before its end: STOP
        // The same worker serves the next request once the stream is drained: it was stopped, not killed.
        pool::Reply again;
        co_await p.exec(ctx, {}, again);
        EXPECT_EQ(again.outcome, pool::Outcome::ok);
        EXPECT_EQ(again.worker_pid, pid);
        EXPECT_EQ(co_await again.collect(), "one\ntwo\nthree\nfour\nfive\n");
        EXPECT_EQ(p.spawned_total(), 1u);
        co_await p.shutdown();
    });
}

TEST(Pool, LargeBodiesAreHandedOverWithoutACopyWithinTheBudget)
{
    asio::io_context io;
    Budget budget(3 << 20);
    auto o = options("echo.php", 1);
    o.budget = &budget;
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        auto ctx = request("/big?n=2000000");
        pool::Reply r;
        co_await p.exec(ctx, pool::BodyRef{}, r);
        EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
        EXPECT_FALSE(r.more());
        EXPECT_FALSE(r.holds_worker()) << "handed over: the worker is free";
        EXPECT_EQ(r.body(), std::string(2000000, 'x'));
        EXPECT_EQ(budget.used(), 2000000u) << "the handed-over body counts against the budget";
        // While this one is held, another 2 MB answer does not fit: it stays in the worker's buffer, the
        // worker held until the reply is finished.
        pool::Reply r2;
        co_await p.exec(ctx, pool::BodyRef{}, r2);
        EXPECT_EQ(r2.outcome, pool::Outcome::ok) << r2.message;
        EXPECT_TRUE(r2.holds_worker());
        EXPECT_EQ(r2.body(), std::string(2000000, 'x'));
        EXPECT_EQ(budget.used(), 2000000u);
        EXPECT_EQ(p.workers().at(0).state, "working") << "held by the reply";
        r2.finish();
        EXPECT_EQ(p.workers().at(0).state, "ready") << "finish() gives the worker back";
        r.finish();
        EXPECT_EQ(budget.used(), 0u) << "finishing the reply gives the bytes back";
        // Small answers are plain copies; the reply is reused.
        co_await p.exec(request("/big?n=1000"), pool::BodyRef{}, r);
        EXPECT_EQ(r.body(), std::string(1000, 'x'));
        EXPECT_FALSE(r.holds_worker());
        EXPECT_EQ(budget.used(), 0u);
        // Moving a reply keeps its body (a short one lives inside the string).
        co_await p.exec(request("/big?n=5"), pool::BodyRef{}, r);
        pool::Reply moved = std::move(r);
        EXPECT_EQ(moved.body(), "xxxxx");
        co_await p.shutdown();
    });
}

TEST(Pool, ABodyInAFileReachesTheWorker)
{
    asio::io_context io;
    pool::Pool p(host(), io, options("echo.php", 1));
    std::string content(3 * 1000 * 1000 + 7, '\0');
    for (std::size_t i = 0; i < content.size(); ++i)
        content[i] = static_cast<char>('a' + i % 26);
    char path[] = "/tmp/ferry-pool-test-XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        pool::BodyRef body;
        body.fd = fd;
        body.size = content.size();
        for (int i = 0; i < 2; ++i) { // read from offset 0 every time (a retry sends it again)
            pool::Reply r;
            co_await p.exec(request("/echo-body", "POST"), body, r);
            EXPECT_EQ(r.outcome, pool::Outcome::ok) << r.message;
            EXPECT_TRUE(r.body() == content) << "body size " << r.body().size();
        }
        co_await p.shutdown();
    });
    ::close(fd);
}

// An answer read whole (a WebSocket event's actions) from a worker that streams on: joined only up to what
// one frame may carry, then bad_response, nothing kept, the stream stopped (STOP) — the worker drained, not
// killed, and it serves the next request.
TEST(Pool, AStreamReadWholeIsBoundedByTheFrameLimit)
{
    asio::io_context io;
    auto o = options("stream.php");
    o.max_frame_payload = 10 * 1024; // /stream-long sends 50 chunks of 1 KiB
    pool::Pool p(host(), io, o);
    run(io, [&]() -> awaitable<void> {
        EXPECT_TRUE(started(co_await p.start()));
        pool::Reply r;
        auto ctx = request("/stream-long");
        co_await p.exec(ctx, {}, r);
        const std::string all = co_await r.collect();
        EXPECT_EQ(r.outcome, pool::Outcome::bad_response);
        EXPECT_NE(r.message.find("streamed more than 10240 bytes"), std::string::npos) << r.message;
        EXPECT_TRUE(all.empty());
        EXPECT_FALSE(r.holds_worker());
        pool::Reply again;
        auto ctx2 = request("/x");
        co_await p.exec(ctx2, {}, again);
        EXPECT_EQ(co_await again.collect(), "one\ntwo\nthree\nfour\nfive\n");
        EXPECT_EQ(again.worker_pid, r.worker_pid) << "stopped, not killed";
        EXPECT_EQ(p.spawned_total(), 1u);
        co_await p.shutdown();
    });
}
