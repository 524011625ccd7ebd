// Delivering one immutable message to every event loop once (internal to server/; docs/architecture.md,
// "Several loops"). The WebSocket topic hub and server-sent events are built on it: a message published on
// any thread is posted once per loop, not once per connection, and each loop then hands the same shared
// buffer to its own connections without a lock (a loop's state is touched only by its own thread).
#pragma once

#include "ferry/base/io.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace ferry::server::detail {

template <typename Message> class Broadcast {
public:
    using Shared = std::shared_ptr<const Message>;
    // Runs on the loop's own thread, once per message.
    using Receiver = std::function<void(const Shared &)>;

    // Set up before the loops' threads start; read-only after (so post() needs no lock).
    void add_loop(asio::any_io_executor loop, Receiver receiver)
    {
        loops_.push_back(Loop{std::move(loop), std::move(receiver)});
    }
    std::size_t loops() const { return loops_.size(); }

    // From any thread: the message goes to every loop once, in the order this thread posted it; the
    // buffer is shared, never copied. Returns the number of loops it was posted to.
    std::size_t post(Shared message) const
    {
        for (const Loop &l : loops_)
            asio::post(l.executor, [receiver = &l.receiver, message] { (*receiver)(message); });
        return loops_.size();
    }

private:
    struct Loop {
        asio::any_io_executor executor;
        Receiver receiver;
    };
    std::vector<Loop> loops_;
};

} // namespace ferry::server::detail
