// Broadcast: one immutable message to every event loop once, from any thread, with several loops running
// on their own threads.
#include "loops/broadcast.hpp"

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using ferry::server::detail::Broadcast;
namespace asio = boost::asio;

namespace {

struct LoopThread {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
    std::vector<std::pair<const std::string *, std::string>> got; // touched by this loop's thread only
    std::thread thread;
};

TEST(Broadcast, EveryLoopGetsEachMessageOnceInOrderWithoutCopies)
{
    constexpr int loops = 3, posters = 2, per_poster = 2000;
    std::vector<std::unique_ptr<LoopThread>> ls;
    Broadcast<std::string> hub;
    for (int i = 0; i < loops; ++i) {
        ls.push_back(std::make_unique<LoopThread>());
        LoopThread *l = ls.back().get();
        hub.add_loop(l->io.get_executor(),
                     [l](const std::shared_ptr<const std::string> &m) { l->got.emplace_back(m.get(), *m); });
    }
    for (auto &l : ls)
        l->thread = std::thread([p = l.get()] { p->io.run(); });

    std::vector<std::vector<std::shared_ptr<const std::string>>> sent(posters);
    std::vector<std::thread> threads;
    for (int p = 0; p < posters; ++p)
        threads.emplace_back([&, p] {
            for (int i = 0; i < per_poster; ++i) {
                auto m = std::make_shared<const std::string>(std::to_string(p) + ":" + std::to_string(i));
                sent[static_cast<std::size_t>(p)].push_back(m);
                EXPECT_EQ(hub.post(m), static_cast<std::size_t>(loops));
            }
        });
    // A loop posts too (a message published while handling an event on that loop).
    auto from_loop = std::make_shared<const std::string>("from-loop");
    asio::post(ls[0]->io, [&] { hub.post(from_loop); });
    for (auto &t : threads)
        t.join();
    for (auto &l : ls) {
        l->work.reset();
        l->thread.join();
    }

    for (auto &l : ls) {
        ASSERT_EQ(l->got.size(), static_cast<std::size_t>(posters * per_poster + 1));
        std::vector<int> next(posters, 0);
        int loop_messages = 0;
        for (const auto &[ptr, text] : l->got) {
            if (text == "from-loop") {
                EXPECT_EQ(ptr, from_loop.get());
                ++loop_messages;
                continue;
            }
            auto colon = text.find(':');
            int p = std::stoi(text.substr(0, colon)), i = std::stoi(text.substr(colon + 1));
            EXPECT_EQ(i, next[static_cast<std::size_t>(p)]++) << "in the order its poster posted";
            EXPECT_EQ(ptr, sent[static_cast<std::size_t>(p)][static_cast<std::size_t>(i)].get())
                << "the same buffer";
        }
        EXPECT_EQ(loop_messages, 1);
        for (int p = 0; p < posters; ++p)
            EXPECT_EQ(next[static_cast<std::size_t>(p)], per_poster) << "each message exactly once";
    }
    // Every loop has let go of the buffers: only the test holds them.
    for (auto &v : sent)
        for (auto &m : v)
            EXPECT_EQ(m.use_count(), 1);
}

TEST(Broadcast, NoLoopsNothingPosted)
{
    Broadcast<int> hub;
    EXPECT_EQ(hub.post(std::make_shared<const int>(1)), 0u);
    EXPECT_EQ(hub.loops(), 0u);
}

} // namespace
