// A WebSocket or SSE connection's send queue (internal to server/; docs/architecture.md, "WebSockets"):
// frames waiting for the socket, within the connection's limits (websockets.max_queue_messages,
// max_queue_bytes) and the server-wide budget (max_send_queue_memory); past either, the overflow policy
// applies (drop_oldest: the oldest messages go, then the new one if the connection's limits still leave
// no room; close: the waiting messages go and the connection is to be closed with 1008). Past the budget a
// queue still keeps its newest message, so the budget is exceeded by at most a frame being written plus
// one message per connection. Control frames (close, ping, pong, an SSE
// heartbeat) always go in. Written to the connection's Stream in batches (writev); a frame is never cut. It
// holds no memory while empty (an idle connection's cost: bench/idle_memory.py). It decides; its connection
// logs and acts (ws/connection_write.cpp).
#pragma once

#include "transport/stream.hpp"
#include "ws/budget.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace ferry::server::detail::ws {

class Outbox {
public:
    struct Limits {
        std::size_t max_messages = 0, max_bytes = 0;
        conf::Overflow overflow = conf::Overflow::drop_oldest;
    };
    // `limits` outlive the outbox (its loop's: one copy for all its connections).
    Outbox(ByteBudget &budget, const Limits &limits) : budget_(budget), limits_(limits) {}
    ~Outbox() { clear(); }
    Outbox(const Outbox &) = delete;
    Outbox &operator=(const Outbox &) = delete;

    // What push() did.
    struct Pushed {
        enum Result {
            queued,      // in the queue (older messages may have been dropped to make room)
            dropped_new, // the connection's limits leave no room once every older message is gone: dropped
                         // too
            overflow,    // overflow: close: the waiting messages are gone; close the connection (1008)
        } result = queued;
        std::size_t dropped = 0;             // messages dropped, the new one included
        bool by_budget = false;              // the server-wide budget was full (not this connection's limits)
        std::size_t messages = 0, bytes = 0; // what waited when the limit was hit
    };
    Pushed push(std::shared_ptr<const std::string> frame, bool control);

    enum class Written {
        drained,         // nothing waits any more (the memory is given back)
        blocked,         // the stream takes no more now: wait until it is writable
        blocked_reading, // the stream must read first (a TLS stream's handshake): wait until it is readable
        failed,          // the client is gone: nothing queued can reach it
    };
    // Writes what waits to `stream` until it takes no more.
    Written write_to(Stream &stream);

    std::size_t pending() const { return s_ ? s_->queue.size() - s_->head : 0; } // frames waiting
    std::size_t bytes() const { return s_ ? s_->bytes : 0; }
    // Drops everything (the budget gets its bytes back).
    void clear();
    std::size_t memory() const; // bytes held beyond the object

private:
    struct Out {
        std::shared_ptr<const std::string> frame;
        std::size_t offset; // bytes of it already written
        bool control;
    };
    struct State {
        std::vector<Out> queue; // [head, size) waits to be written
        std::size_t head = 0, bytes = 0;
    };
    void unqueue(std::size_t n); // n bytes left the queue (and the budget)
    bool over_limits(std::size_t size) const;

    ByteBudget &budget_;
    const Limits &limits_;
    std::unique_ptr<State> s_; // only while something waits
};

} // namespace ferry::server::detail::ws
