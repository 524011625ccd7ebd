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
    asio::io_context io;
    Worker w{io};
    asio::writable_pipe feed{io};
    Channel() { asio::connect_pipe(w.out, feed); }

    void write(std::string_view bytes)
    {
        ASSERT_EQ(::write(feed.native_handle(), bytes.data(), bytes.size()),
                  static_cast<ssize_t>(bytes.size()));
    }

    struct Got {
        bool ok = false;
        relay::FrameHeader h;
        std::string payload, error;
    };

    // `later` is written once read_frame has started and found the first part incomplete.
    Got read(std::uint32_t max_payload = 1 << 20, std::string later = {})
    {
        Got g;
        bool done = false;
        // A named lambda: the coroutine refers to its captures, which must outlive it (GCC 12).
        auto body = [&]() -> awaitable<void> {
            std::string_view p;
            g.ok = co_await w.read_frame(g.h, p, g.error, max_payload);
            g.payload.assign(p);
            if (g.ok)
                w.consume_frame();
            done = true;
        };
        asio::co_spawn(io, body(), asio::detached);
        if (!later.empty())
            asio::post(io, [this, later] { write(later); });
        io.restart();
        io.run_for(2s);
        EXPECT_TRUE(done) << "read_frame did not complete";
        return g;
    }
};

const std::string stop_request =
    relay::encode_frame(0, 0, std::array<std::uint32_t, 1>{13}, R"({"stop":true})");

} // namespace

TEST(WorkerChannel, ReadsFramesSplitAnywhereAndBackToBack)
{
    std::string two = stop_request + relay::encode_frame(relay::flag::error, 0, {}, "boom");
    for (std::size_t cut = 1; cut < two.size(); ++cut) {
        Channel c;
        c.write(two.substr(0, cut));
        auto a = c.read(1 << 20, two.substr(cut)); // the rest arrives while read_frame waits
        ASSERT_TRUE(a.ok) << a.error << " cut " << cut;
        EXPECT_EQ(a.h.option_count, 1);
        EXPECT_EQ(a.payload, R"({"stop":true})");
        auto b = c.read();
        ASSERT_TRUE(b.ok) << b.error << " cut " << cut;
        EXPECT_EQ(b.h.flags, relay::flag::error);
        EXPECT_EQ(b.payload, "boom");
    }
}

TEST(WorkerChannel, StrayOutputIsReportedWithItsBytes)
{
    Channel c;
    c.write("Could not open input file: app.php\n");
    auto g = c.read();
    EXPECT_FALSE(g.ok);
    EXPECT_NE(g.error.find("Could not open input file"), std::string::npos) << g.error;
}

TEST(WorkerChannel, OversizeAndTruncatedFramesFail)
{
    {
        Channel c;
        c.write(relay::encode_frame(0, 0, std::array<std::uint32_t, 1>{0}, std::string(100, 'x')));
        auto g = c.read(/*max_payload=*/50);
        EXPECT_FALSE(g.ok);
        EXPECT_FALSE(g.error.empty());
    }
    {
        Channel c;
        c.write(stop_request.substr(0, 20));
        c.feed.close();
        auto g = c.read();
        EXPECT_FALSE(g.ok);
        EXPECT_NE(g.error.find("middle of a frame"), std::string::npos) << g.error;
    }
}

TEST(WorkerChannel, LargeFramesGrowTheBuffer)
{
    Channel c;
    std::string big(3 * 1024 * 1024, 'z');
    std::string frame = relay::encode_frame(0, 0, std::array<std::uint32_t, 1>{0}, big);
    // A pipe holds 64 KiB: write from another process so read_frame drains as it goes.
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
    auto g = c.read(8 << 20);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(g.ok) << g.error;
    EXPECT_EQ(g.payload.size(), big.size());
    EXPECT_EQ(g.payload, big);
}

TEST(WorkerState, DescribesExits)
{
    EXPECT_EQ(describe_status(3 << 8), "exited with code 3");
    EXPECT_EQ(describe_status(SIGKILL), "killed by signal 9 (SIGKILL)");
    EXPECT_STREQ(state_name(State::working), "working");
}
