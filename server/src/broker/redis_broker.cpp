#include "broker/redis_broker.hpp"

#include "broker/envelope.hpp"
#include "broker/redis_core.hpp"
#include "ws/events.hpp"
#include "ws/frame.hpp"

#include <boost/asio/post.hpp>

#include <map>
#include <random>

namespace ferry::server::detail::broker {
namespace {

constexpr std::size_t max_backlog = 16u << 20; // bytes of PUBLISH not yet written: past it, dropped
constexpr long long history_page = 8;          // events of a topic's history read at once

} // namespace

void RedisBroker::Core::deliver(const std::string &bytes)
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

void RedisBroker::Core::send_publish(const std::vector<Copy> &copies)
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

awaitable<std::optional<Reply>> RedisBroker::Core::ask(std::vector<std::string> args)
{
    struct Wait {
        explicit Wait(asio::any_io_executor e) : timer(e) {}
        asio::steady_timer timer;
        std::optional<Reply> reply;
    };
    auto w = std::make_shared<Wait>(ex);
    if (!up)
        co_return std::nullopt;
    w->timer.expires_after(cfg.connect_timeout);
    append_command(cmd->out(), std::vector<std::string_view>(args.begin(), args.end()));
    ++cmd->pending;
    expects.push_back(Expect{false, [w](Reply *r) {
                                 if (r)
                                     w->reply = std::move(*r);
                                 w->timer.cancel();
                             }});
    cmd->kick();
    co_await w->timer.async_wait(nothrow);
    co_return std::move(w->reply);
}

awaitable<std::vector<ws::KeptEvent>> RedisBroker::Core::fetch_history(std::vector<std::string> of,
                                                                       std::uint64_t after)
{
    // Newest first, a page at a time, until the events are older than `after`, the list ends, or a send
    // queue's worth of bytes is read: a page is at most history_page events of at most history_bytes each,
    // far below the largest reply the reader takes.
    std::vector<ws::KeptEvent> got;
    for (const std::string &t : of) {
        std::uint64_t bytes = 0;
        for (long long end = -1; history > 0 && bytes < history_bytes; end -= history_page) {
            // (GCC 12: no braced list inside a co_await expression.)
            std::vector<std::string> args{"LRANGE", history_key(t), std::to_string(end - history_page + 1),
                                          std::to_string(end)};
            auto r = co_await ask(std::move(args));
            if (!r || r->type != Reply::Type::array || r->elements.empty())
                break;
            bool older = false;
            for (auto it = r->elements.rbegin(); it != r->elements.rend() && !older && bytes < history_bytes;
                 ++it) {
                std::string why;
                auto e = decode(it->str, why);
                if (!e || e->binary)
                    continue;
                older = e->event_id <= after;
                if (older)
                    break;
                auto chunk =
                    std::make_shared<const std::string>(ws::encode_sse_chunk(e->event_id, e->payload));
                bytes += chunk->size();
                got.push_back(ws::KeptEvent{e->event_id, std::move(chunk)});
            }
            if (older || r->elements.size() < static_cast<std::size_t>(history_page))
                break;
        }
    }
    co_return got;
}

void RedisBroker::Core::on_interest(const std::string &topic, bool joined)
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

std::string random_node_name()
{
    std::random_device rd;
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    return buf;
}

RedisBroker::RedisBroker(asio::any_io_executor loop0, const Broadcast<ws::Delivery> &local,
                         const conf::WebsocketsConfig &ws, Counters &counters)
    : core_(std::make_shared<Core>(loop0, local, ws, counters,
                                   ws.broker.node.empty() ? random_node_name() : ws.broker.node))
{
    std::uint64_t h = 1469598103934665603ull; // FNV-1a of the node's name: its 10 bits in event ids
    for (unsigned char c : core_->node)
        h = (h ^ c) * 1099511628211ull;
    tag_ = h & 0x3ff;
    counters.enable("redis");
}

std::unique_ptr<RedisBroker> RedisBroker::configured(asio::any_io_executor loop0,
                                                     const Broadcast<ws::Delivery> &local,
                                                     const conf::WebsocketsConfig &ws, Counters &counters)
{
    if (!ws.enabled || !ws.broker.redis())
        return nullptr;
    return std::make_unique<RedisBroker>(loop0, local, ws, counters);
}

std::string_view RedisBroker::node() const
{
    return core_->node;
}

RedisBroker::~RedisBroker() = default;

void RedisBroker::start()
{
    log::info("broker", "websockets.broker: redis at " + core_->cfg.addrs.front() + ", this node is \"" +
                            core_->node + "\"");
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
    e.origin = core_->node;
    std::string_view payload = d.reason;
    if (d.kind == ws::Delivery::Kind::close) {
        e.kind = Envelope::Kind::close;
        e.code = d.code;
    } else {
        e.kind = Envelope::Kind::send;
        if (!d.frame || !frame_payload(*d.frame, payload, e.binary))
            return;
    }
    std::vector<Copy> copies;
    for (auto &[node, ids] : by_node) {
        e.ids = std::move(ids);
        copies.push_back(Copy{core_->cfg.prefix + "n:" + std::string(node), encode(e, payload), {}});
    }
    asio::post(core_->ex, [core = core_, copies = std::move(copies)] { core->send_publish(copies); });
}

void RedisBroker::publish(ws::SharedDelivery d)
{
    if (d->kind != ws::Delivery::Kind::publish) {
        if (!d->remote.empty())
            send_remote(*d);
        if (!d->ids.empty())
            core_->local.post(std::move(d));
        return;
    }
    core_->local.post(d);
    if (d->topics.empty() || !d->frame)
        return;
    Envelope e;
    e.kind = Envelope::Kind::publish;
    e.origin = core_->node;
    std::string_view payload; // the frame's own bytes: encoded straight from there, not copied first
    if (!frame_payload(*d->frame, payload, e.binary))
        return;
    e.topics = d->topics;
    e.event_id = d->event_id;
    // Kept in the topic's history in Redis unless larger than a resume reads (Core::history_bytes).
    const bool keep =
        core_->history > 0 && d->sse && d->event_id != 0 && d->sse->size() <= core_->history_bytes;
    std::vector<Copy> copies;
    copies.reserve(d->topics.size());
    for (std::size_t i = 0; i < d->topics.size(); ++i) {
        e.topic = static_cast<std::uint32_t>(i);
        copies.push_back(Copy{core_->channel(d->topics[i]), encode(e, payload),
                              keep ? core_->history_key(d->topics[i]) : std::string()});
    }
    asio::post(core_->ex, [core = core_, copies = std::move(copies)] { core->send_publish(copies); });
}

bool RedisBroker::shares_history() const
{
    return core_->history > 0;
}

awaitable<std::vector<ws::KeptEvent>> RedisBroker::shared_history(std::vector<std::string> topics,
                                                                  std::uint64_t after)
{
    // Asked on a loop's thread: the work runs on loop 0, the answer comes back here.
    co_return co_await asio::co_spawn(core_->ex, core_->fetch_history(std::move(topics), after),
                                      asio::use_awaitable);
}

void RedisBroker::interest(const std::string &topic, bool joined)
{
    asio::post(core_->ex, [core = core_, topic, joined] { core->on_interest(topic, joined); });
}

} // namespace ferry::server::detail::broker
