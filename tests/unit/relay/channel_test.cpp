#include "ferry/relay/channel.hpp"

#include <gtest/gtest.h>

#include <boost/asio/connect_pipe.hpp>

#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace ferry;
using namespace ferry::relay;
using namespace std::chrono_literals;

namespace {

// A channel whose stdout end is a pipe this test writes to (the worker's side).
struct Harness {
    explicit Harness(std::uint32_t max_payload = 1 << 20)
    {
        ch = std::make_shared<Channel>(io, max_payload);
        asio::connect_pipe(ch->stdout_pipe(), feed);
        ch->on_unexpected = [this](const std::string &what) { unexpected.push_back(what); };
        ch->watch();
    }

    asio::io_context io;
    asio::writable_pipe feed{io};
    std::shared_ptr<Channel> ch;
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
        FrameHeader h;
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
            auto f = co_await ch->next_frame();
            g.kind = ch->error_kind();
            g.ok = f.has_value();
            if (f) {
                g.h = f->header;
                g.payload.assign(f->payload);
                if (last) {
                    if (auto end = ch->end_exchange(); !end)
                        g.error = end.error().message;
                } else {
                    ch->consume_frame();
                }
            } else {
                g.error = f.error().message;
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

const std::string stop_request = encode_frame(0, 0, std::array<std::uint32_t, 1>{13}, R"({"stop":true})");
const std::string error_frame = encode_frame(flag::error, 0, {}, "boom");

} // namespace

TEST(Channel, ReadsFramesSplitAnywhereAndBackToBack)
{
    std::string two = stop_request + error_frame;
    for (std::size_t cut = 1; cut < two.size(); ++cut) {
        Harness c;
        c.ch->begin_exchange();
        c.write(two.substr(0, cut));
        auto a = c.read(two.substr(cut)); // the rest arrives while next_frame waits
        ASSERT_TRUE(a.ok) << a.error << " cut " << cut;
        EXPECT_EQ(a.h.option_count, 1);
        EXPECT_EQ(a.payload, R"({"stop":true})");
        auto b = c.read({}, /*last=*/true);
        ASSERT_TRUE(b.ok) << b.error << " cut " << cut;
        EXPECT_EQ(b.h.flags, flag::error);
        EXPECT_EQ(b.payload, "boom");
        EXPECT_TRUE(b.error.empty()) << b.error;
        EXPECT_TRUE(c.unexpected.empty());
    }
}

TEST(Channel, OutputWhileIdleIsReportedAtOnce)
{
    // A late second response: nobody asked, so nobody gets it, and the pool hears about it right away.
    Harness c;
    c.run();
    c.write(error_frame);
    c.run();
    ASSERT_EQ(c.unexpected.size(), 1u);
    EXPECT_NE(c.unexpected[0].find("while no request was in flight"), std::string::npos) << c.unexpected[0];
    EXPECT_NE(c.unexpected[0].find("boom"), std::string::npos) << c.unexpected[0];
    EXPECT_TRUE(c.ch->broken());
    // A request given to it anyway would fail instead of reading those bytes as its answer.
    c.ch->begin_exchange();
    auto g = c.read();
    EXPECT_FALSE(g.ok);
}

TEST(Channel, BytesThatCameWhileIdleAreNeverTheNextRequestsAnswer)
{
    // The race seen under load (tests/e2e/test_rogue_workers.py): a late frame lands in the pipe of an idle
    // worker, and the next request is about to be written before the watch's handler has run. claim(), which
    // the pool calls before it writes a request, finds the bytes: the worker is retired, the request goes to
    // another one. Written both while the watch waits and right after an exchange ended with its check.
    for (bool after_exchange : {false, true}) {
        Harness c;
        c.run();
        if (after_exchange) {
            c.ch->begin_exchange();
            auto g = c.read(error_frame, /*last=*/true);
            ASSERT_TRUE(g.ok) << g.error;
            c.ch->watch(); // parked idle, as the pool does
        }
        c.write(stop_request); // the loop does not run: its handler has not seen it
        EXPECT_FALSE(c.ch->claim());
        ASSERT_EQ(c.unexpected.size(), 1u);
        EXPECT_NE(c.unexpected[0].find("while no request was in flight"), std::string::npos)
            << c.unexpected[0];
        EXPECT_NE(c.unexpected[0].find("stop"), std::string::npos) << c.unexpected[0];
        EXPECT_TRUE(c.ch->broken());
        c.run(); // the watch's handler, when it runs, reports nothing more
        EXPECT_EQ(c.unexpected.size(), 1u);
    }
}

TEST(Channel, TheCheckAtTheEndOfAnExchangeReadsWhatFollowedTheReply)
{
    // end_exchange(check_quiet) reads the pipe once: a second reply written after the first (in another
    // write, so not in the reply's read) is found there; without the check it is left to the idle watch.
    for (bool check : {true, false}) {
        Harness c;
        c.ch->begin_exchange();
        c.write(error_frame);
        auto g = c.read();
        ASSERT_TRUE(g.ok) << g.error;
        c.write(stop_request);
        auto end = c.ch->end_exchange(check);
        EXPECT_EQ(!end, check);
        if (check) {
            EXPECT_NE(end.error().message.find("after its response"), std::string::npos)
                << end.error().message;
            EXPECT_NE(end.error().message.find("stop"), std::string::npos) << end.error().message;
        } else {
            c.ch->watch();
            c.run();
            ASSERT_EQ(c.unexpected.size(), 1u) << "the watch reports bytes already there when it starts";
        }
        EXPECT_TRUE(c.ch->broken());
    }
}

TEST(Channel, AQuietClaimLeavesTheReplyToTheExchange)
{
    Harness c;
    for (int i = 0; i < 3; ++i) {
        c.ch->watch(); // parked idle, as the pool does (a no-op the first time: the harness watches)
        c.run();
        EXPECT_TRUE(c.ch->claim());
        EXPECT_TRUE(c.ch->claim()) << "claiming twice reads nothing the second time either";
        c.ch->begin_exchange();
        auto g = c.read(error_frame, /*last=*/true); // the reply arrives while the idle watch still waits
        ASSERT_TRUE(g.ok) << g.error;
        EXPECT_EQ(g.payload, "boom");
        EXPECT_TRUE(g.error.empty()) << g.error;
    }
    EXPECT_TRUE(c.unexpected.empty());
    // An EOF found by claim: the worker is gone; the channel says so instead of giving a request to it.
    c.ch->watch();
    c.feed.close();
    EXPECT_FALSE(c.ch->claim());
    EXPECT_EQ(c.ch->error_kind(), ChannelError::closed);
    EXPECT_TRUE(c.unexpected.empty()) << "an exit is the reaper's news, not unexpected output";
}

TEST(Channel, AReplyBeforeTheRequestWasReadIsAnEarlierRequestsOutput)
{
    // Issue 41 item 3: a worker answers, then writes a second answer 50 ms later while the next request
    // already waits in its stdin. The second answer comes before the worker read that request: it cannot be
    // its reply, and the request never ran. Once the worker has read the request, a frame is its reply.
    for (bool worker_read_it : {false, true}) {
        Harness c;
        asio::readable_pipe worker_stdin(c.io);
        asio::connect_pipe(worker_stdin, c.ch->stdin_pipe());
        c.run();
        ASSERT_TRUE(c.ch->claim());
        c.ch->begin_exchange();
        const std::string request = encode_frame(0, 0, std::array<std::uint32_t, 1>{2}, "{}");
        ASSERT_EQ(::write(c.ch->stdin_pipe().native_handle(), request.data(), request.size()),
                  static_cast<ssize_t>(request.size()));
        EXPECT_TRUE(c.ch->request_unread());
        if (worker_read_it) {
            std::string got(request.size(), '\0');
            ASSERT_EQ(::read(worker_stdin.native_handle(), got.data(), got.size()),
                      static_cast<ssize_t>(got.size()));
            EXPECT_FALSE(c.ch->request_unread());
        }
        auto g = c.read(error_frame);
        EXPECT_EQ(g.ok, worker_read_it) << g.error;
        if (worker_read_it) {
            EXPECT_EQ(g.payload, "boom");
            continue;
        }
        EXPECT_EQ(g.kind, ChannelError::premature);
        EXPECT_NE(g.error.find("before it had read the request"), std::string::npos) << g.error;
        EXPECT_NE(g.error.find("boom"), std::string::npos) << g.error;
        EXPECT_TRUE(c.ch->broken());
    }
}

TEST(Channel, ClaimReadsThePipeOfAWorkerHandedStraightOn)
{
    // Issue 41 item 3: a worker handed from its reply straight to the next request (no idle watch): claim()
    // reads its pipe before the request goes out, so a second answer written after the reply never becomes
    // the next request's.
    Harness c;
    c.ch->begin_exchange();
    c.write(error_frame);
    auto g = c.read({}, /*last=*/true);
    ASSERT_TRUE(g.ok) << g.error;
    EXPECT_TRUE(c.ch->claim()) << "nothing after the reply yet";
    c.write(stop_request); // a late second answer, before the next request is written
    EXPECT_FALSE(c.ch->claim());
    ASSERT_EQ(c.unexpected.size(), 1u);
    EXPECT_NE(c.unexpected[0].find("stop"), std::string::npos) << c.unexpected[0];
}

TEST(Channel, SecondReplyInTheSameReadIsLeftover)
{
    Harness c;
    c.ch->begin_exchange();
    c.write(error_frame + stop_request);
    auto g = c.read({}, /*last=*/true);
    ASSERT_TRUE(g.ok);
    EXPECT_EQ(g.payload, "boom");
    EXPECT_NE(g.error.find("after its response"), std::string::npos) << g.error;
    EXPECT_TRUE(c.ch->broken());
    EXPECT_TRUE(c.unexpected.empty()) << "end_exchange reports leftovers to its caller";
}

TEST(Channel, IdleWatchResumesAfterACleanExchange)
{
    Harness c;
    for (int i = 0; i < 3; ++i) {
        c.ch->begin_exchange();
        auto g = c.read(error_frame, /*last=*/true);
        ASSERT_TRUE(g.ok) << g.error;
        EXPECT_TRUE(g.error.empty());
    }
    c.ch->watch(); // parked idle, as the pool does
    c.run();
    EXPECT_TRUE(c.unexpected.empty());
    c.write("x");
    c.run();
    EXPECT_EQ(c.unexpected.size(), 1u);
}

TEST(Channel, StrayOutputIsReportedWithItsBytes)
{
    Harness c;
    c.ch->begin_exchange();
    c.write("Could not open input file: app.php\n");
    auto g = c.read();
    EXPECT_FALSE(g.ok);
    EXPECT_EQ(g.kind, ChannelError::not_a_frame);
    EXPECT_NE(g.error.find("Could not open input file"), std::string::npos) << g.error;
}

TEST(Channel, OversizeAndTruncatedFramesFail)
{
    {
        Harness c(/*max_payload=*/50);
        c.ch->begin_exchange();
        c.write(encode_frame(0, 0, std::array<std::uint32_t, 1>{0}, std::string(100, 'x')));
        auto g = c.read();
        EXPECT_FALSE(g.ok);
        EXPECT_FALSE(g.error.empty());
    }
    {
        Harness c;
        c.ch->begin_exchange();
        c.write(stop_request.substr(0, 20));
        c.feed.close();
        auto g = c.read();
        EXPECT_FALSE(g.ok);
        EXPECT_EQ(g.kind, ChannelError::closed);
        EXPECT_NE(g.error.find("middle of a frame"), std::string::npos) << g.error;
    }
}

TEST(Channel, LargeFramesGrowTheBufferAndCanBeTakenWithoutCopy)
{
    Harness c(8 << 20);
    std::string big(3 * 1024 * 1024, 'z');
    std::string frame = encode_frame(0, 0, std::array<std::uint32_t, 1>{0}, big);
    c.ch->begin_exchange();
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
    const char *view_before = nullptr;
    auto body = [&]() -> awaitable<void> {
        auto f = co_await c.ch->next_frame();
        EXPECT_TRUE(f) << (f ? "" : f.error().message);
        if (f)
            view_before = f->payload.data();
        taken = c.ch->take_frame();
        auto end = c.ch->end_exchange();
        EXPECT_TRUE(end) << (end ? "" : end.error().message);
        done = true;
    };
    asio::co_spawn(c.io, body(), asio::detached);
    c.run_until(done);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(done);
    ASSERT_TRUE(taken.data);
    const std::size_t offset = frame.size() - big.size(); // the payload follows the header
    EXPECT_EQ(taken.data.get() + offset, view_before) << "the payload did not move";
    EXPECT_EQ(std::string_view(taken.data.get() + offset, big.size()), big);
    EXPECT_EQ(taken.capacity, frame.size()) << "a frame of known size gets exactly its size";
}

TEST(Channel, DeadlineFiredButNotYetRunDoesNotTouchTheNextExchange)
{
    // The race of issue 5 item 7: the deadline timer of exchange 1 has expired and its handler is queued when
    // exchange 1 ends; exchange 2 starts before the handler runs. The handler must do nothing.
    Harness c;
    asio::steady_timer first(c.io);
    bool second_started = false;
    first.expires_after(1ms); // earlier than the deadline: runs first in the same batch
    first.async_wait([&](error_code) {
        // Exchange 1 ends (its deadline's handler is already queued behind us), exchange 2 begins.
        c.ch->disarm();
        c.ch->begin_exchange();
        c.ch->arm(10s);
        second_started = true;
    });
    c.ch->begin_exchange();
    c.ch->arm(2ms);                    // exchange 1's deadline
    std::this_thread::sleep_for(20ms); // both timers expire before the loop runs: one batch, in order
    c.run(20ms);
    ASSERT_TRUE(second_started);
    EXPECT_FALSE(c.ch->broken()) << "a stale deadline failed the next exchange";
    auto g = c.read(error_frame, /*last=*/true);
    EXPECT_TRUE(g.ok) << g.error;
}

TEST(Channel, DeadlineFailsTheWait)
{
    Harness c;
    c.ch->begin_exchange();
    c.ch->arm(20ms);
    auto g = c.read();
    EXPECT_FALSE(g.ok);
    EXPECT_EQ(g.kind, ChannelError::timed_out);
}
