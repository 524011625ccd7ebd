// The inside of RedisBroker (internal to broker/): its state on loop 0 and what runs there — the session
// with Redis (redis_session.cpp: connecting, the watch, the two readers) and the traffic (redis_broker.cpp:
// publishing, delivering what other nodes published, the SSE history, subscriptions).
#pragma once

#include "broker/redis_broker.hpp"
#include "broker/redis_conn.hpp"
#include "ferry/base/log.hpp"

#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>

namespace ferry::server::detail::broker {

using clock = std::chrono::steady_clock;

// A message for Redis: its channel and envelope, and the key of the topic's SSE history ("" for none).
struct Copy {
    std::string channel, bytes, history_key;
};

struct RedisBroker::Core : std::enable_shared_from_this<RedisBroker::Core> {
    Core(asio::any_io_executor e, const Broadcast<ws::Delivery> &l, const conf::WebsocketsConfig &w,
         Counters &n, std::string node_name)
        : ex(e), local(l), cfg(w.broker), sse(!w.sse_path.empty()), history(sse ? w.sse_history : 0),
          history_bytes(w.max_queue_bytes), counters(n), node(std::move(node_name)), wake(e), idle(e)
    {
    }
    asio::any_io_executor ex;
    const Broadcast<ws::Delivery> &local;
    const conf::BrokerConfig cfg;
    const bool sse;
    const std::uint64_t history; // SSE events kept per topic in Redis (websockets.sse_history; 0: none)
    // A resume reads at most this many bytes of a topic's history (a resuming client's send queue,
    // websockets.max_queue_bytes, holds no more), and a larger event is not kept there.
    const std::uint64_t history_bytes;
    Counters &counters;
    const std::string node;
    std::unordered_map<std::string, unsigned> topics; // loops with a member in each
    std::shared_ptr<RedisConn> cmd, sub;              // while up
    // What each command sent on cmd waits for, in order: a PUBLISH (lost if the connection breaks first), or
    // anything else, maybe with a callback (null reply: the connection broke).
    struct Expect {
        bool publish = false;
        std::function<void(Reply *)> done;
    };
    std::deque<Expect> expects;
    bool up = false, stopping = false;
    std::string broken; // why the session ended
    asio::steady_timer wake, idle;
    unsigned tasks = 0;
    std::string logged; // the last failure logged (the same again: once in 30 s)
    clock::time_point logged_at{};

    std::string channel(const std::string &topic) const { return cfg.prefix + "t:" + topic; }
    std::string history_key(const std::string &topic) const { return cfg.prefix + "h:" + topic; }

    void command(std::initializer_list<std::string_view> args, Expect e)
    {
        append_command(cmd->out(), args);
        ++cmd->pending;
        expects.push_back(std::move(e));
    }

    // The session ended: what waited for an answer gets none.
    void forget_expects();
    std::string node_channel() const { return cfg.prefix + "n:" + node; }

    // A task on loop 0 that stop() waits for.
    template <typename F> void spawn(F &&f)
    {
        ++tasks;
        asio::co_spawn(ex, std::forward<F>(f), [self = shared_from_this()](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception &x) {
                    log::error("broker", std::string("internal error: ") + x.what());
                }
            }
            if (--self->tasks == 0 && self->stopping)
                self->idle.cancel();
        });
    }

    // The session (redis_session.cpp).
    awaitable<void> run(); // connects, subscribes, watches; again after a loss, with back-off, until stop()
    // Connected, AUTH (with a password), and a PING answered with PONG: Redis, and willing.
    awaitable<Result<void>> open(RedisConn &c, const conf::Address &a);
    void subscribe_all(); // the node's channel and every topic of its loops
    // Until a connection breaks: PINGs on quiet connections, and a deadline on every answer.
    awaitable<void> watch(std::shared_ptr<RedisConn> c, std::shared_ptr<RedisConn> s);
    awaitable<void> read_cmd(std::shared_ptr<RedisConn> c); // answers, matched with `expects`
    awaitable<void> read_sub(std::shared_ptr<RedisConn> s); // messages, (un)subscribe confirmations
    // Ends the session (or the connecting): both connections closed, the watch woken.
    void break_session(const std::string &why);
    void log_failure(const std::string &why); // the same failure again: once in 30 s
    awaitable<void> stop();

    // The traffic (redis_broker.cpp).
    void deliver(const std::string &bytes); // a message from the channel of a topic or of this node
    void send_publish(const std::vector<Copy> &copies);
    // The SSE events of `of` after `after` that Redis keeps (what arrived within connect_timeout).
    awaitable<std::vector<ws::KeptEvent>> fetch_history(std::vector<std::string> of, std::uint64_t after);
    // One command on cmd and its answer (none: down, the connection broke, or connect_timeout passed).
    awaitable<std::optional<Reply>> ask(std::vector<std::string> args);
    void on_interest(const std::string &topic, bool joined);
};

} // namespace ferry::server::detail::broker
