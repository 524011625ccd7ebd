#include "worker.hpp"

#include <gtest/gtest.h>

#include <boost/asio/connect_pipe.hpp>

#include <sys/wait.h>
#include <unistd.h>

using namespace ferry;
using namespace ferry::pool;
using namespace std::chrono_literals;

namespace {

// A Worker whose stdout is a pipe this test writes to.
struct Channel {
    explicit Channel(std::uint32_t max_payload = 1 << 20)
    {
        w = std::make_shared<Worker>(io, max_payload);
        asio::connect_pipe(w->out, feed);
        w->on_unexpected = [this](const std::string &what) { unexpected.push_back(what); };
        w->start_reading();
    }

    asio::io_context io;
    asio::writable_pipe feed{io};
    WorkerPtr w;
    std::vector<std::string> unexpected;

    void write(std::string_view bytes)
    {
        ASSERT_EQ(::write(feed.native_handle(), bytes.data(), bytes.size()),
                  static_cast<ssize_t>(bytes.size()));
    }

    void run(std::chrono::milliseconds d = 50ms)
    {
        io.restart();
        io.run_for(d);
    }

    // Runs the loop until `done` (the channel keeps a read pending, so the loop never runs out of work).
    void run_until(const bool &done, std::chrono::milliseconds limit = 3000ms)
    {
        io.restart();
        auto deadline = std::chrono::steady_clock::now() + limit;
        while (!done && std::chrono::steady_clock::now() < deadline)
            io.run_one_for(10ms);
    }

    struct Got {
        bool ok = false;
        relay::FrameHeader h;
        std::string payload, error;
        ChannelError kind = ChannelError::none;
    };

    // One frame of an open exchange. `later` is written once next_frame has started waiting.
    Got read(std::string later = {}, bool last = false)
    {
        Got g;
        bool done = false;
        // A named lambda: the coroutine refers to its captures, which must outlive it (GCC 12).
        auto body = [&]() -> awaitable<void> {
            std::string_view p;
            g.ok = co_await w->next_frame(g.h, p, g.error);
            g.kind = w->error_kind();
            g.payload.assign(p);
            if (g.ok) {
                if (last) {
                    std::string leftover;
                    if (!w->end_exchange(leftover))
                        g.error = leftover;
                } else {
                    w->consume_frame();
                }
            }
            done = true;
        };
        asio::co_spawn(io, body(), asio::detached);
        if (!later.empty())
            asio::post(io, [this, later] { write(later); });
        run_until(done);
        EXPECT_TRUE(done) << "next_frame did not complete";
        return g;
    }
};

const std::string stop_request =
    relay::encode_frame(0, 0, std::array<std::uint32_t, 1>{13}, R"({"stop":true})");
const std::string error_frame = relay::encode_frame(relay::flag::error, 0, {}, "boom");

} // namespace

TEST(WorkerChannel, ReadsFramesSplitAnywhereAndBackToBack)
{
    std::string two = stop_request + error_frame;
    for (std::size_t cut = 1; cut < two.size(); ++cut) {
        Channel c;
        c.w->begin_exchange();
        c.write(two.substr(0, cut));
        auto a = c.read(two.substr(cut)); // the rest arrives while next_frame waits
        ASSERT_TRUE(a.ok) << a.error << " cut " << cut;
        EXPECT_EQ(a.h.option_count, 1);
        EXPECT_EQ(a.payload, R"({"stop":true})");
        auto b = c.read({}, /*last=*/true);
        ASSERT_TRUE(b.ok) << b.error << " cut " << cut;
        EXPECT_EQ(b.h.flags, relay::flag::error);
        EXPECT_EQ(b.payload, "boom");
        EXPECT_TRUE(b.error.empty()) << b.error;
        EXPECT_TRUE(c.unexpected.empty());
    }
}

TEST(WorkerChannel, OutputWhileIdleIsReportedAtOnce)
{
    // A late second response: nobody asked, so nobody gets it, and the pool hears about it right away.
    Channel c;
    c.run();
    c.write(error_frame);
    c.run();
    ASSERT_EQ(c.unexpected.size(), 1u);
    EXPECT_NE(c.unexpected[0].find("while no request was in flight"), std::string::npos) << c.unexpected[0];
    EXPECT_NE(c.unexpected[0].find("boom"), std::string::npos) << c.unexpected[0];
    EXPECT_TRUE(c.w->broken());
    // A request given to it anyway would fail instead of reading those bytes as its answer.
    c.w->begin_exchange();
    auto g = c.read();
    EXPECT_FALSE(g.ok);
}

TEST(WorkerChannel, SecondReplyInTheSameReadIsLeftover)
{
    Channel c;
    c.w->begin_exchange();
    c.write(error_frame + stop_request);
    auto g = c.read({}, /*last=*/true);
    ASSERT_TRUE(g.ok);
    EXPECT_EQ(g.payload, "boom");
    EXPECT_NE(g.error.find("after its response"), std::string::npos) << g.error;
    EXPECT_TRUE(c.w->broken());
    EXPECT_TRUE(c.unexpected.empty()) << "end_exchange reports leftovers to its caller";
}

TEST(WorkerChannel, IdleWatchResumesAfterACleanExchange)
{
    Channel c;
    for (int i = 0; i < 3; ++i) {
        c.w->begin_exchange();
        auto g = c.read(error_frame, /*last=*/true);
        ASSERT_TRUE(g.ok) << g.error;
        EXPECT_TRUE(g.error.empty());
    }
    c.run();
    EXPECT_TRUE(c.unexpected.empty());
    c.write("x");
    c.run();
    EXPECT_EQ(c.unexpected.size(), 1u);
}

TEST(WorkerChannel, StrayOutputIsReportedWithItsBytes)
{
    Channel c;
    c.w->begin_exchange();
    c.write("Could not open input file: app.php\n");
    auto g = c.read();
    EXPECT_FALSE(g.ok);
    EXPECT_EQ(g.kind, ChannelError::not_a_frame);
    EXPECT_NE(g.error.find("Could not open input file"), std::string::npos) << g.error;
}

TEST(WorkerChannel, OversizeAndTruncatedFramesFail)
{
    {
        Channel c(/*max_payload=*/50);
        c.w->begin_exchange();
        c.write(relay::encode_frame(0, 0, std::array<std::uint32_t, 1>{0}, std::string(100, 'x')));
        auto g = c.read();
        EXPECT_FALSE(g.ok);
        EXPECT_FALSE(g.error.empty());
    }
    {
        Channel c;
        c.w->begin_exchange();
        c.write(stop_request.substr(0, 20));
        c.feed.close();
        auto g = c.read();
        EXPECT_FALSE(g.ok);
        EXPECT_EQ(g.kind, ChannelError::closed);
        EXPECT_NE(g.error.find("middle of a frame"), std::string::npos) << g.error;
    }
}

TEST(WorkerChannel, LargeFramesGrowTheBufferAndCanBeTakenWithoutCopy)
{
    Channel c(8 << 20);
    std::string big(3 * 1024 * 1024, 'z');
    std::string frame = relay::encode_frame(0, 0, std::array<std::uint32_t, 1>{0}, big);
    c.w->begin_exchange();
    // A pipe holds 64 KiB: write from another process so the channel drains as it goes.
    pid_t child = ::fork();
    if (child == 0) {
        const char *p = frame.data();
        std::size_t left = frame.size();
        while (left > 0) {
            ssize_t n = ::write(c.feed.native_handle(), p, left);
            if (n <= 0)
                ::_exit(1);
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        ::_exit(0);
    }
    bool done = false;
    std::string payload_copy;
    FrameBuffer taken;
    std::size_t offset = 0;
    const char *view_before = nullptr;
    auto body = [&]() -> awaitable<void> {
        relay::FrameHeader h;
        std::string_view p;
        std::string err;
        EXPECT_TRUE(co_await c.w->next_frame(h, p, err)) << err;
        view_before = p.data();
        taken = c.w->take_frame(offset);
        std::string leftover;
        EXPECT_TRUE(c.w->end_exchange(leftover)) << leftover;
        done = true;
    };
    asio::co_spawn(c.io, body(), asio::detached);
    c.run_until(done);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(done);
    ASSERT_TRUE(taken.data);
    EXPECT_EQ(taken.data.get() + offset, view_before) << "the payload did not move";
    EXPECT_EQ(std::string_view(taken.data.get() + offset, big.size()), big);
    EXPECT_EQ(taken.capacity, frame.size()) << "a frame of known size gets exactly its size";
}

TEST(WorkerChannel, DeadlineFiredButNotYetRunDoesNotTouchTheNextExchange)
{
    // The race of issue 5 item 7: the deadline timer of exchange 1 has expired and its handler is queued when
    // exchange 1 ends; exchange 2 starts before the handler runs. The handler must do nothing.
    Channel c;
    asio::steady_timer first(c.io);
    bool second_started = false;
    first.expires_after(1ms); // earlier than the deadline: runs first in the same batch
    first.async_wait([&](error_code) {
        // Exchange 1 ends (its deadline's handler is already queued behind us), exchange 2 begins.
        c.w->disarm();
        c.w->begin_exchange();
        c.w->arm(10s);
        second_started = true;
    });
    c.w->begin_exchange();
    c.w->arm(2ms);                     // exchange 1's deadline
    std::this_thread::sleep_for(20ms); // both timers expire before the loop runs: one batch, in order
    c.run(20ms);
    ASSERT_TRUE(second_started);
    EXPECT_FALSE(c.w->broken()) << "a stale deadline failed the next exchange";
    auto g = c.read(error_frame, /*last=*/true);
    EXPECT_TRUE(g.ok) << g.error;
}

TEST(WorkerChannel, DeadlineFailsTheWait)
{
    Channel c;
    c.w->begin_exchange();
    c.w->arm(20ms);
    auto g = c.read();
    EXPECT_FALSE(g.ok);
    EXPECT_EQ(g.kind, ChannelError::timed_out);
}

TEST(WorkerState, DescribesExits)
{
    EXPECT_EQ(describe_status(3 << 8), "exited with code 3");
    EXPECT_EQ(describe_status(SIGKILL), "killed by signal 9 (SIGKILL)");
    EXPECT_STREQ(state_name(State::working), "working");
}
