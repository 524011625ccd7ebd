#include "broker/redis_broker.hpp"

#include "broker/envelope.hpp"
#include "broker/redis_conn.hpp"
#include "ferry/base/log.hpp"
#include "ws/events.hpp"
#include "ws/frame.hpp"

#include <boost/asio/post.hpp>

#include <deque>
#include <functional>
#include <map>
#include <random>
#include <unordered_map>

namespace ferry::server::detail::broker {
namespace {

using clock = std::chrono::steady_clock;
constexpr auto backoff_first = std::chrono::milliseconds(100);
constexpr auto backoff_max = std::chrono::seconds(2); // Redis back: messages cross again within ~2 s
constexpr auto ping_after = std::chrono::seconds(2);  // a PING on a connection quiet for this long
constexpr std::size_t max_backlog = 16u << 20;        // bytes of PUBLISH not yet written: past it, dropped
constexpr std::size_t subscribe_batch = 1024;         // channels per SUBSCRIBE

std::string where(const conf::Address &a)
{
    return a.to_string();
}

} // namespace

// A message for Redis: its channel and envelope, and the key of the topic's SSE history ("" for none).
struct Copy {
    std::string channel, bytes, history_key;
};

struct RedisBroker::Core : std::enable_shared_from_this<RedisBroker::Core> {
    Core(asio::any_io_executor e, const Broadcast<ws::Delivery> &l, const conf::WebsocketsConfig &w,
         Counters &n, std::string node_name)
        : ex(e), local(l), cfg(w.broker), sse(!w.sse_path.empty()), history(sse ? w.sse_history : 0),
          counters(n), node(std::move(node_name)), wake(e), idle(e)
    {
    }
    asio::any_io_executor ex;
    const Broadcast<ws::Delivery> &local;
    const conf::BrokerConfig cfg;
    const bool sse;
    const std::uint64_t history; // SSE events kept per topic in Redis (websockets.sse_history; 0: none)
    Counters &counters;
    const std::string node;
    std::unordered_map<std::string, unsigned> topics; // loops with a member in each
    std::shared_ptr<RedisConn> cmd, sub;              // while up
    // What each command sent on cmd waits for, in order: a PUBLISH (lost if the connection breaks first), or
    // anything else, maybe with a callback (null reply: the connection broke).
    struct Expect {
        bool publish = false;
        std::function<void(const Reply *)> done;
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
    void forget_expects()
    {
        auto left = std::move(expects);
        expects.clear();
        for (Expect &e : left) {
            if (e.publish)
                counters.dropped(Counters::down);
            if (e.done)
                e.done(nullptr);
        }
    }
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

    // Ends the session (or the connecting): both connections closed, the watch woken.
    void break_session(const std::string &why)
    {
        if (broken.empty())
            broken = why;
        if (cmd)
            cmd->close();
        if (sub)
            sub->close();
        wake.cancel();
    }

    void log_failure(const std::string &why)
    {
        const auto now = clock::now();
        if (why == logged && now - logged_at < std::chrono::seconds(30))
            return;
        log::warn("broker",
                  "websockets.broker: " + why +
                      (up ? "" : "; topics stay local (messages to other nodes are lost) until it is back"));
        logged = why;
        logged_at = now;
    }

    // Connected, AUTH (with a password), and a PING answered with PONG: Redis, and willing.
    awaitable<Result<void>> open(RedisConn &c, const conf::Address &a)
    {
        auto connected = co_await c.connect(a, cfg.connect_timeout);
        if (!connected)
            co_return fail(where(a) + ": " + connected.error().message);
        if (!cfg.password.empty())
            c.send({"AUTH", cfg.password});
        c.send({"PING"});
        if (!cfg.password.empty()) {
            auto r = co_await c.read(cfg.connect_timeout);
            if (!r)
                co_return fail(where(a) + " did not answer as Redis does (" + r.error().message + ")");
            if (r->type == Reply::Type::error)
                co_return fail(where(a) + " refused the password (websockets.broker.password): " + r->str);
        }
        auto r = co_await c.read(cfg.connect_timeout);
        if (!r)
            co_return fail(where(a) + " did not answer as Redis does (" + r.error().message + ")");
        if (r->type == Reply::Type::error)
            co_return fail(where(a) + " answered " + r->describe() +
                           (r->str.rfind("NOAUTH", 0) == 0 ? " (set websockets.broker.password)" : ""));
        if (!r->is_status("PONG"))
            co_return fail(where(a) + " did not answer as Redis does (PING got " + r->describe() + ")");
        c.pending = 0;
        co_return Result<void>();
    }

    void subscribe_all()
    {
        std::vector<std::string> channels{node_channel()};
        for (const auto &[t, n] : topics)
            channels.push_back(channel(t));
        for (std::size_t i = 0; i < channels.size(); i += subscribe_batch) {
            std::vector<std::string_view> args{"SUBSCRIBE"};
            for (std::size_t j = i; j < std::min(channels.size(), i + subscribe_batch); ++j)
                args.push_back(channels[j]);
            append_command(sub->out(), args);
            sub->pending += args.size() - 1;
        }
        sub->kick();
        counters.subscriptions(topics.size());
    }

    awaitable<void> run()
    {
        auto self = shared_from_this();
        auto backoff = std::chrono::milliseconds(backoff_first);
        std::size_t next = 0;
        bool was_up = false;
        while (!stopping) {
            const conf::Address &a = cfg.servers[next % cfg.servers.size()];
            auto c = std::make_shared<RedisConn>(ex);
            auto s = std::make_shared<RedisConn>(ex);
            cmd = c; // reachable by stop() while connecting
            sub = s;
            auto ok = co_await open(*c, a);
            if (ok)
                ok = co_await open(*s, a);
            if (stopping)
                break;
            if (!ok) {
                c->close();
                s->close();
                counters.set_down(ok.error().message);
                log_failure(ok.error().message);
                ++next;
                wake.expires_after(backoff);
                co_await wake.async_wait(nothrow);
                backoff = std::min<std::chrono::milliseconds>(backoff * 2, backoff_max);
                continue;
            }
            broken.clear();
            up = true;
            subscribe_all();
            if (was_up)
                counters.reconnected();
            was_up = true;
            counters.set_up(where(a));
            logged.clear();
            log::info("broker", "websockets.broker: node \"" + node + "\" connected to redis at " + where(a) +
                                    " (" + std::to_string(topics.size()) + " topic(s) subscribed)");
            backoff = std::chrono::milliseconds(backoff_first);
            spawn(read_cmd(c));
            spawn(read_sub(s));
            co_await watch(c, s);
            up = false;
            // What was sent and not answered may or may not have reached Redis: counted as lost, never
            // sent again (a message seen twice is worse than one lost, and the count says so).
            forget_expects();
            cmd.reset();
            sub.reset();
            if (stopping)
                break;
            counters.set_down(broken);
            log_failure("lost redis at " + where(a) + ": " + broken);
            ++next;
            wake.expires_after(backoff_first);
            co_await wake.async_wait(nothrow);
        }
        counters.set_down("stopped");
    }

    // Until a connection breaks: PINGs on quiet connections, and a deadline on every answer.
    awaitable<void> watch(std::shared_ptr<RedisConn> c, std::shared_ptr<RedisConn> s)
    {
        const auto deadline = std::max<conf::Duration>(cfg.connect_timeout, std::chrono::seconds(3));
        while (!stopping && c->open() && s->open()) {
            wake.expires_after(std::chrono::seconds(1));
            co_await wake.async_wait(nothrow);
            const auto now = clock::now();
            for (RedisConn *x : {c.get(), s.get()}) {
                if (x->pending > 0 && now - x->last_read > deadline) {
                    break_session("no answer for " + std::to_string(deadline.count() / 1000) + " s");
                    break;
                }
                if (x->pending == 0 && now - x->last_read > ping_after) {
                    if (x == c.get()) {
                        command({"PING"}, {});
                        x->kick();
                    } else {
                        x->send({"PING"});
                    }
                }
            }
        }
        if (broken.empty())
            broken = stopping ? "stopping" : "connection closed";
    }

    awaitable<void> read_cmd(std::shared_ptr<RedisConn> c)
    {
        while (c->open()) {
            auto r = co_await c->read();
            if (!r) {
                break_session(r.error().message);
                break;
            }
            if (c->pending > 0)
                --c->pending;
            if (expects.empty()) {
                break_session("an answer to no command: " + r->describe());
                break;
            }
            Expect e = std::move(expects.front());
            expects.pop_front();
            if (r->type == Reply::Type::error) {
                if (e.publish)
                    counters.dropped(Counters::down);
                log_failure("redis refused a command: " + r->describe());
            }
            if (e.done)
                e.done(&*r);
        }
    }

    awaitable<void> read_sub(std::shared_ptr<RedisConn> s)
    {
        while (s->open()) {
            auto r = co_await s->read();
            if (!r) {
                break_session(r.error().message);
                break;
            }
            if (r->type == Reply::Type::error) {
                break_session("redis refused a subscription: " + r->describe());
                break;
            }
            if (r->type != Reply::Type::array || r->elements.empty() ||
                r->elements[0].type != Reply::Type::string) {
                break_session("an answer no subscriber gets: " + r->describe());
                break;
            }
            const std::string &kind = r->elements[0].str;
            if (kind == "message" && r->elements.size() == 3) {
                deliver(r->elements[2].str);
                continue;
            }
            if (s->pending > 0 && (kind == "subscribe" || kind == "unsubscribe" || kind == "pong"))
                --s->pending;
        }
    }

    // A message from the channel of a topic or of this node.
    void deliver(const std::string &bytes)
    {
        std::string why;
        auto e = decode(bytes, why);
        if (!e) {
            counters.dropped(Counters::invalid);
            log_failure("a message on a channel of \"" + cfg.prefix + "\" is not Ferry's: " + why);
            return;
        }
        if (e->origin == node)
            return; // delivered here when published
        auto d = std::make_shared<ws::Delivery>();
        switch (e->kind) {
        case Envelope::Kind::publish:
            d->kind = ws::Delivery::Kind::publish;
            d->only_topic = static_cast<int>(e->topic);
            d->topics = std::move(e->topics);
            d->event_id = e->event_id;
            break;
        case Envelope::Kind::send:
            d->kind = ws::Delivery::Kind::send;
            d->ids = std::move(e->ids);
            break;
        case Envelope::Kind::close:
            d->kind = ws::Delivery::Kind::close;
            d->ids = std::move(e->ids);
            d->code = e->code;
            d->reason = std::move(e->payload);
            break;
        }
        if (e->kind != Envelope::Kind::close) {
            d->frame = std::make_shared<const std::string>(
                ws::encode_frame(e->binary ? ws::Opcode::binary : ws::Opcode::text, e->payload));
            if (sse && !e->binary)
                d->sse = std::make_shared<const std::string>(ws::encode_sse_chunk(d->event_id, e->payload));
        }
        counters.received();
        local.post(std::move(d));
    }

    void send_publish(const std::vector<Copy> &copies)
    {
        if (!up) {
            counters.dropped(Counters::down, copies.size());
            return;
        }
        if (cmd->queued() > max_backlog) {
            counters.dropped(Counters::backlog, copies.size());
            log_failure("redis takes messages slower than they are published: " +
                        std::to_string(max_backlog >> 20) + " MiB waiting, messages dropped");
            return;
        }
        const std::string keep = std::to_string(-static_cast<long long>(history));
        for (const Copy &c : copies) {
            command({"PUBLISH", c.channel, c.bytes}, Expect{true, {}});
            if (!c.history_key.empty()) {
                // The topic's SSE history, shared by every node: the newest `history` events, kept a day.
                command({"RPUSH", c.history_key, c.bytes}, {});
                command({"LTRIM", c.history_key, keep, "-1"}, {});
                command({"EXPIRE", c.history_key, "86400"}, {});
            }
        }
        counters.published(copies.size());
        cmd->kick();
    }

    // The SSE events of `topics` after `after` that Redis keeps (what arrived within connect_timeout).
    awaitable<std::vector<ws::KeptEvent>> fetch_history(std::vector<std::string> of, std::uint64_t after)
    {
        struct Wait {
            explicit Wait(asio::any_io_executor e) : timer(e) {}
            asio::steady_timer timer;
            std::size_t left = 0;
            std::vector<ws::KeptEvent> got;
        };
        auto w = std::make_shared<Wait>(ex);
        if (!up || history == 0 || of.empty())
            co_return w->got;
        w->timer.expires_after(cfg.connect_timeout);
        w->left = of.size();
        for (const std::string &t : of)
            command(
                {"LRANGE", history_key(t), "0", "-1"},
                Expect{false, [w, after](const Reply *r) {
                           if (r && r->type == Reply::Type::array)
                               for (const Reply &item : r->elements) {
                                   std::string why;
                                   auto e = decode(item.str, why);
                                   if (e && e->event_id > after && !e->binary)
                                       w->got.push_back(ws::KeptEvent{
                                           e->event_id, std::make_shared<const std::string>(
                                                            ws::encode_sse_chunk(e->event_id, e->payload))});
                               }
                           if (--w->left == 0)
                               w->timer.cancel();
                       }});
        cmd->kick();
        co_await w->timer.async_wait(nothrow);
        co_return std::move(w->got);
    }

    void on_interest(const std::string &topic, bool joined)
    {
        if (joined) {
            if (++topics[topic] == 1 && up)
                sub->send({"SUBSCRIBE", channel(topic)});
        } else if (auto it = topics.find(topic); it != topics.end() && --it->second == 0) {
            topics.erase(it);
            if (up)
                sub->send({"UNSUBSCRIBE", channel(topic)});
        }
        counters.subscriptions(topics.size());
    }

    awaitable<void> stop()
    {
        stopping = true;
        break_session("stopping");
        while (tasks > 0) {
            idle.expires_at(clock::time_point::max());
            co_await idle.async_wait(nothrow);
        }
    }
};

std::string random_node_name()
{
    std::random_device rd;
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    return buf;
}

RedisBroker::RedisBroker(asio::any_io_executor loop0, const Broadcast<ws::Delivery> &local,
                         const conf::WebsocketsConfig &ws, Counters &counters)
    : local_(local), loop0_(loop0), node_(ws.broker.node.empty() ? random_node_name() : ws.broker.node)
{
    std::uint64_t h = 1469598103934665603ull; // FNV-1a of the node's name: its 10 bits in event ids
    for (unsigned char c : node_)
        h = (h ^ c) * 1099511628211ull;
    tag_ = h & 0x3ff;
    core_ = std::make_shared<Core>(loop0, local, ws, counters, node_);
    counters.enable("redis");
}

RedisBroker::~RedisBroker() = default;

void RedisBroker::start()
{
    core_->spawn(core_->run());
}

awaitable<void> RedisBroker::stop()
{
    co_await core_->stop();
}

std::uint64_t RedisBroker::next_event_id()
{
    // ms since 2024-01-01 << 20 | sequence << 10 | tag: a sequence past 1023 in one millisecond borrows the
    // next one (still rising, still this node's).
    const auto ms = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()) -
                    1704067200000ull;
    const std::uint64_t base = (ms << 20) | tag_;
    std::uint64_t last = last_event_id_.load(std::memory_order_relaxed);
    for (;;) {
        const std::uint64_t next = std::max(base, last + (1u << 10));
        if (last_event_id_.compare_exchange_weak(last, next, std::memory_order_relaxed))
            return next;
    }
}

void RedisBroker::send_remote(const ws::Delivery &d)
{
    std::map<std::string_view, std::vector<std::uint64_t>> by_node;
    for (const std::string &text : d.remote) {
        const ws::Target t = ws::parse_target(text);
        if (t.id != 0)
            by_node[t.node].push_back(t.id);
    }
    Envelope e;
    e.origin = node_;
    if (d.kind == ws::Delivery::Kind::close) {
        e.kind = Envelope::Kind::close;
        e.code = d.code;
        e.payload = d.reason;
    } else {
        e.kind = Envelope::Kind::send;
        std::string_view payload;
        if (!d.frame || !frame_payload(*d.frame, payload, e.binary))
            return;
        e.payload.assign(payload);
    }
    std::vector<Copy> copies;
    for (auto &[node, ids] : by_node) {
        e.ids = std::move(ids);
        copies.push_back(Copy{core_->cfg.prefix + "n:" + std::string(node), encode(e), {}});
    }
    asio::post(loop0_, [core = core_, copies = std::move(copies)] { core->send_publish(copies); });
}

void RedisBroker::publish(ws::SharedDelivery d)
{
    if (d->kind != ws::Delivery::Kind::publish) {
        if (!d->remote.empty())
            send_remote(*d);
        if (!d->ids.empty())
            local_.post(std::move(d));
        return;
    }
    local_.post(d);
    if (d->topics.empty() || !d->frame)
        return;
    Envelope e;
    e.kind = Envelope::Kind::publish;
    e.origin = node_;
    std::string_view payload;
    if (!frame_payload(*d->frame, payload, e.binary))
        return;
    e.payload.assign(payload);
    e.topics = d->topics;
    e.event_id = d->event_id;
    const bool keep = core_->history > 0 && d->sse && d->event_id != 0;
    std::vector<Copy> copies;
    copies.reserve(d->topics.size());
    for (std::size_t i = 0; i < d->topics.size(); ++i) {
        e.topic = static_cast<std::uint32_t>(i);
        copies.push_back(Copy{core_->channel(d->topics[i]), encode(e),
                              keep ? core_->history_key(d->topics[i]) : std::string()});
    }
    asio::post(loop0_, [core = core_, copies = std::move(copies)] { core->send_publish(copies); });
}

bool RedisBroker::shares_history() const
{
    return core_->history > 0;
}

awaitable<std::vector<ws::KeptEvent>> RedisBroker::shared_history(std::vector<std::string> topics,
                                                                  std::uint64_t after)
{
    // Asked on a loop's thread: the work runs on loop 0, the answer comes back here.
    co_return co_await asio::co_spawn(loop0_, core_->fetch_history(std::move(topics), after),
                                      asio::use_awaitable);
}

void RedisBroker::interest(const std::string &topic, bool joined)
{
    asio::post(loop0_, [core = core_, topic, joined] { core->on_interest(topic, joined); });
}

} // namespace ferry::server::detail::broker
