// Topics and connections of one event loop, and the seam every publish goes through (internal to server/;
// docs/architecture.md, "WebSockets"). A message is encoded once into a shared frame; the Publisher carries
// it to every loop once (the cross-loop Broadcast), and each loop's Hub hands the same buffer to its own
// subscribers, who queue it without a copy. A broker (Redis pub/sub, NATS) for several Ferry nodes is a
// Publisher too: it sends what is published here to the broker and feeds what the broker delivers into the
// local Broadcast; the Hub does not change.
#pragma once

#include "ferry/base/io.hpp"
#include "loops/broadcast.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ferry::server::detail::ws {

class WsConn;

// What crosses loops: immutable once posted.
struct Delivery {
    enum class Kind : std::uint8_t { publish, send, close };
    Kind kind = Kind::publish;
    std::vector<std::string> topics; // publish
    std::vector<std::uint64_t> ids;  // send, close: the target connections (on whichever loop they are)
    std::vector<std::string> remote; // send, close: connections of other nodes ("<node>.1.42"), for a broker
    std::uint64_t exclude = 0;       // publish: not to this connection (0: none)
    std::shared_ptr<const std::string> frame; // publish, send: the encoded frame, shared by every receiver
    std::uint16_t code = 1000;                // close
    std::string reason;                       // close
    // Server-sent events (text messages only): the event as an SSE chunk, and its id (Last-Event-ID).
    std::shared_ptr<const std::string> sse;
    std::uint64_t event_id = 0;
    // publish, from another node (broker/): that node published it once per topic, each copy on the topic's
    // channel; this copy is for topics[only_topic] alone, not for the members of the topics before it (they
    // got the earlier copy). -1: every topic (published here).
    int only_topic = -1;
};
using SharedDelivery = std::shared_ptr<const Delivery>;

// An SSE event kept for Last-Event-ID: its id and its chunk.
struct KeptEvent {
    std::uint64_t id;
    std::shared_ptr<const std::string> sse;
};

// Adds a target as PHP writes it ("1.42", "<node>.1.42") to `ids` (a connection of this node, `own` its name)
// or to `remote` (another node's); what is not an id is left out. False only for `self_id` (the caller's own
// connection, which it serves itself).
bool add_target(Delivery &d, std::string_view text, std::string_view own, std::uint64_t self_id = 0);

class Publisher;
// Gives a text message its SSE form (once, for every receiver) and, with `ids`, its event id from
// `ids->next_event_id()` (a publish: kept in the topics' history); null for a send, which has none. A binary
// message has no SSE form and takes no id.
void prepare_sse(Delivery &d, std::string_view payload, bool binary, Publisher *ids);
// One SSE event as an HTTP chunk ("id: N\ndata: line\n...\n\n"); id 0: none.
std::string encode_sse_chunk(std::uint64_t id, std::string_view payload);
// The id of such a chunk (0: none).
std::uint64_t sse_event_id(std::string_view chunk);
// Sorted by id, each id once.
std::vector<KeptEvent> in_id_order(std::vector<KeptEvent> events);

class Publisher {
public:
    virtual ~Publisher() = default;
    // From any loop's thread: delivered to every loop (this one included), in the order published here.
    virtual void publish(SharedDelivery d) = 0;
    // The id of the next SSE event published (Last-Event-ID resumes from it): one sequence for every loop
    // this publisher reaches (a broker's: unique across nodes). From any thread.
    virtual std::uint64_t next_event_id()
    {
        return last_event_id_.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    // A broker that keeps the SSE history of every node (an event stream resuming here may have read its
    // events from another node): its events of `topics` after `after`, fetched from a loop's thread, resumed
    // there. Without one, the loop's own history is all there is.
    virtual bool shares_history() const { return false; }
    virtual awaitable<std::vector<KeptEvent>> shared_history(std::vector<std::string> topics,
                                                             std::uint64_t after)
    {
        (void)topics;
        (void)after;
        co_return std::vector<KeptEvent>{};
    }
    // This node's name in connection ids ("" without a broker: ids are "1.42").
    virtual std::string_view node() const { return {}; }
    // From a loop's thread: its first connection joined `topic` (true), or its last one left (false). A
    // broker subscribes the node to the topics some loop has.
    virtual void interest(const std::string &topic, bool joined)
    {
        (void)topic;
        (void)joined;
    }

private:
    std::atomic<std::uint64_t> last_event_id_{0};
};

// One Ferry process: the cross-loop Broadcast.
class LocalPublisher final : public Publisher {
public:
    explicit LocalPublisher(const Broadcast<Delivery> &loops) : loops_(loops) {}
    void publish(SharedDelivery d) override { loops_.post(std::move(d)); }

private:
    const Broadcast<Delivery> &loops_;
};

struct HubStats {
    std::uint64_t delivered = 0; // messages queued to receivers
    std::uint64_t publishes = 0; // deliveries of kind publish seen by this loop
};

// One loop's topics and connections; touched by its own thread only.
class Hub {
public:
    void add(WsConn *c);
    void remove(WsConn *c); // leaves every topic too
    void join(WsConn *c, const std::string &topic);
    void leave(WsConn *c, const std::string &topic);
    WsConn *find(std::uint64_t id) const;
    // Runs a delivery on this loop's connections.
    void deliver(const Delivery &d);

    std::size_t connections() const { return conns_.size(); }
    // Calls f(WsConn &) for every connection (f must not add or remove connections synchronously).
    template <typename F> void each(F &&f)
    {
        for (auto &[id, c] : conns_)
            f(*c);
    }
    std::size_t topics() const { return topics_.size(); }
    std::size_t subscribers(const std::string &topic) const;
    const HubStats &stats() const { return stats_; }
    // Told when a topic gets its first member here and loses its last (a broker's subscriptions).
    void watch(Publisher *p) { interest_ = p; }

    // Server-sent events' resume: each topic's last `per_topic` text messages (0: none kept), at most
    // `bytes` of them per topic (the send queue's bound), and 64 topics' worth of bytes in all.
    void keep_history(std::size_t per_topic, std::size_t bytes)
    {
        history_limit_ = per_topic;
        history_bytes_ = bytes;
    }
    std::size_t history_bytes() const { return history_total_; }
    // The kept events of these topics with an id above `after`, in id order, each once.
    std::vector<KeptEvent> history(const std::vector<std::string> &topics, std::uint64_t after) const;

    // A connection's place in one topic's member list (swap-remove keeps leave O(1)).
    struct Membership {
        struct Topic *topic;
        std::size_t slot;
    };

private:
    std::unordered_map<std::string, std::unique_ptr<struct Topic>> topics_;
    std::unordered_map<std::uint64_t, WsConn *> conns_;
    std::uint64_t stamp_ = 0; // one per publish: a member of several of its topics gets it once
    Publisher *interest_ = nullptr;
    void deliver_topic(const Delivery &d, const std::string &name, std::uint64_t stamp);
    HubStats stats_;
    using Kept = KeptEvent;
    struct Ring {
        std::vector<Kept> kept; // oldest first
        std::size_t bytes = 0;
    };
    void remember(const std::string &topic, Kept k);
    std::unordered_map<std::string, Ring> history_;
    std::size_t history_limit_ = 0, history_bytes_ = 0, history_total_ = 0;
};

struct Topic {
    std::string name;
    struct Member {
        WsConn *conn;
        std::size_t membership; // index in the connection's memberships
    };
    std::vector<Member> members;
};

} // namespace ferry::server::detail::ws
