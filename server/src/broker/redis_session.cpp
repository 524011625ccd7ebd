#include "broker/redis_core.hpp"

namespace ferry::server::detail::broker {
namespace {

constexpr auto backoff_first = std::chrono::milliseconds(100);
constexpr auto backoff_max = std::chrono::seconds(2); // Redis back: messages cross again within ~2 s
constexpr auto ping_after = std::chrono::seconds(2);  // a PING on a connection quiet for this long
constexpr std::size_t subscribe_batch = 1024;         // channels per SUBSCRIBE

std::string where(const conf::Address &a)
{
    return a.to_string();
}

} // namespace

awaitable<Result<void>> RedisBroker::Core::open(RedisConn &c, const conf::Address &a)
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

void RedisBroker::Core::subscribe_all()
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

awaitable<void> RedisBroker::Core::run()
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

awaitable<void> RedisBroker::Core::watch(std::shared_ptr<RedisConn> c, std::shared_ptr<RedisConn> s)
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

awaitable<void> RedisBroker::Core::read_cmd(std::shared_ptr<RedisConn> c)
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
            e.done(&*r); // the reply is moved out by whoever waits for it
    }
}

awaitable<void> RedisBroker::Core::read_sub(std::shared_ptr<RedisConn> s)
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

void RedisBroker::Core::break_session(const std::string &why)
{
    if (broken.empty())
        broken = why;
    if (cmd)
        cmd->close();
    if (sub)
        sub->close();
    wake.cancel();
}

void RedisBroker::Core::log_failure(const std::string &why)
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

awaitable<void> RedisBroker::Core::stop()
{
    stopping = true;
    break_session("stopping");
    while (tasks > 0) {
        idle.expires_at(clock::time_point::max());
        co_await idle.async_wait(nothrow);
    }
}

void RedisBroker::Core::forget_expects()
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

} // namespace ferry::server::detail::broker
