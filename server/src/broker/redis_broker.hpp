// websockets.broker: redis (internal to server/; docs/cluster.md): the Publisher that shares topics with
// the other Ferry nodes through Redis pub/sub. A publish is delivered here at once (the local Broadcast,
// whatever Redis does) and sent to Redis once per topic, on the topic's channel; each node subscribes to the
// channels of the topics its connections joined and delivers what other nodes published (its own copies it
// skips: nothing is delivered twice). All the Redis side runs on loop 0, no thread added; what any loop
// publishes is posted there in order, so a topic's messages keep their publisher's order.
#pragma once

#include "broker/counters.hpp"
#include "ferry/base/io.hpp"
#include "ferry/conf/config.hpp"
#include "loops/broadcast.hpp"
#include "ws/hub.hpp"

#include <atomic>
#include <memory>
#include <string>

namespace ferry::server::detail::broker {

class RedisBroker final : public ws::Publisher {
public:
    // `ws`: its broker, and server-sent events (messages from other nodes get their SSE form too; the
    // topics' sse_history is kept in Redis for every node).
    RedisBroker(asio::any_io_executor loop0, const Broadcast<ws::Delivery> &local,
                const conf::WebsocketsConfig &ws, Counters &counters);
    ~RedisBroker() override;
    // The broker websockets.broker asks for: null for `memory` (or without websockets).
    static std::unique_ptr<RedisBroker> configured(asio::any_io_executor loop0,
                                                   const Broadcast<ws::Delivery> &local,
                                                   const conf::WebsocketsConfig &ws, Counters &counters);

    void publish(ws::SharedDelivery d) override;
    // Unique across nodes and rising on each: milliseconds, a sequence, and 10 bits of the node's name.
    std::uint64_t next_event_id() override;
    void interest(const std::string &topic, bool joined) override;
    bool shares_history() const override;
    awaitable<std::vector<ws::KeptEvent>> shared_history(std::vector<std::string> topics,
                                                         std::uint64_t after) override;

    std::string_view node() const override;
    // On loop 0: connects (and reconnects) in the background until stop().
    void start();
    awaitable<void> stop();

    struct Core;

private:
    void send_remote(const ws::Delivery &d); // a send or close to other nodes' connections
    std::shared_ptr<Core> core_;             // the executor, the local Broadcast, the node's name: all there
    std::uint64_t tag_;
    std::atomic<std::uint64_t> last_event_id_{0};
};

// A random node name (8 hex digits), for when websockets.broker.node is not set.
std::string random_node_name();

} // namespace ferry::server::detail::broker
