// Running one coroutine on each of several event loops at once and waiting for all of them: the start, the
// drain and the stop of the server's loops and of the pool's shards (docs/architecture.md, "Several loops").
#pragma once

#include "ferry/base/io.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <vector>

namespace ferry {

// Starts make(i) (an awaitable<T>) on loops[i] for every i at once, then waits on the caller's own loop until
// every one has finished; gives their results in order. The first exception one of them threw is rethrown
// once all are done.
template <typename T, typename Make>
awaitable<std::vector<T>> on_each(const std::vector<asio::any_io_executor> &loops, Make make)
{
    auto caller = co_await asio::this_coro::executor;
    struct Join {
        Join(const asio::any_io_executor &e, std::size_t n) : done(e), left(n), results(n) {}
        asio::steady_timer done;
        std::size_t left;
        std::vector<T> results;
        std::exception_ptr error;
    };
    auto join = std::make_shared<Join>(caller, loops.size());
    join->done.expires_at(std::chrono::steady_clock::time_point::max());
    for (std::size_t i = 0; i < loops.size(); ++i)
        asio::co_spawn(loops[i], make(i), [join, caller, i](std::exception_ptr e, T result) {
            // On loops[i]: the result crosses to the caller's loop before it is stored.
            asio::post(caller, [join, i, e, result = std::move(result)]() mutable {
                join->results[i] = std::move(result);
                if (e && !join->error)
                    join->error = e;
                if (--join->left == 0)
                    join->done.cancel();
            });
        });
    if (join->left > 0) // nothing can finish before this wait: the results come through the caller's loop
        co_await join->done.async_wait(nothrow);
    if (join->error)
        std::rethrow_exception(join->error);
    co_return std::move(join->results);
}

} // namespace ferry
