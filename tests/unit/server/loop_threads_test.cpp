// The loops' threads (loop_threads.hpp): a stop is cancel and join. Loops whose tasks have all ended return
// at finish() without a stop; a loop that still holds a task past the grace period is stopped, named in a
// warning, and what was left in it destroyed while its owner still exists.
#include "../base/log_test_util.hpp"
#include "loop_threads.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>

using namespace std::chrono_literals;
using ferry::server::detail::Loop;
using ferry::server::detail::LoopThreads;
namespace asio = boost::asio;

namespace {

struct Owner {
    std::atomic<int> alive{1};
};

// A task that holds a pointer into its owner and notes when its frame is destroyed.
asio::awaitable<void> waits(asio::steady_timer *t, std::shared_ptr<std::atomic<int>> destroyed)
{
    struct Note {
        std::shared_ptr<std::atomic<int>> n;
        ~Note() { ++*n; }
    } note{destroyed};
    co_await t->async_wait(asio::use_awaitable);
}

} // namespace

TEST(LoopThreads, LoopsWhoseTasksEndedReturnWithoutAStop)
{
    Loop a, b, c;
    LoopThreads threads({&a, &b, &c});
    threads.start();
    std::atomic<int> ran{0};
    // Work on each loop that ends by itself; loop 0's last handler says the server is done.
    asio::post(b, [&] { ++ran; });
    asio::post(c, [&] { ++ran; });
    asio::steady_timer t(a, 50ms);
    t.async_wait([&](auto) {
        ++ran;
        threads.finish(5s);
    });
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(threads.run(), 0u);
    EXPECT_EQ(ran.load(), 3);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 4s); // not the grace period
}

TEST(LoopThreads, ALoopLeftWithATaskIsStoppedNamedAndEmptied)
{
    log_test::CapturedStderr err;
    Loop a, b;
    auto destroyed = std::make_shared<std::atomic<int>>(0);
    asio::steady_timer forgotten(b, std::chrono::hours(1)); // a task nobody ends
    LoopThreads threads({&a, &b});
    threads.start();
    asio::co_spawn(b, waits(&forgotten, destroyed), asio::detached);
    asio::post(a, [&] { threads.finish(200ms); });
    EXPECT_EQ(threads.run(), 1u);
    // Its frame is gone now, while `forgotten` (which it refers to) still exists.
    EXPECT_EQ(destroyed->load(), 1);
    ASSERT_TRUE(ferry::log::flush(2s));
    const std::string out = err.drain();
    EXPECT_NE(out.find("event loop 1 still had work 200 ms after the stop"), std::string::npos) << out;
    EXPECT_EQ(out.find("event loop 0"), std::string::npos) << out;
}

TEST(LoopThreads, FinishIsOnce)
{
    Loop a;
    LoopThreads threads({&a});
    threads.start();
    asio::post(a, [&] {
        threads.finish(5s);
        threads.finish(1ms); // a second call changes nothing
    });
    EXPECT_EQ(threads.run(), 0u);
}
