#include "ws/hub.hpp"

#include "ws/connection.hpp"
#include "ws/events.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace ferry::server::detail::ws {

namespace {
constexpr std::size_t history_topics_max = 4096;        // topics with a history, at most
constexpr std::size_t history_topics_bytes_factor = 64; // all topics' history: 64 topics' worth of bytes
} // namespace

std::string encode_sse_chunk(std::uint64_t id, std::string_view payload)
{
    std::string body;
    body.reserve(payload.size() + 32);
    if (id != 0)
        body += "id: " + std::to_string(id) + "\n";
    // Every line its own data field (a CR, LF or CRLF ends a line in the event-stream format).
    std::size_t start = 0;
    while (true) {
        std::size_t end = payload.find_first_of("\r\n", start);
        body += "data: ";
        body.append(
            payload.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
        body += '\n';
        if (end == std::string_view::npos)
            break;
        start = end + (payload[end] == '\r' && end + 1 < payload.size() && payload[end + 1] == '\n' ? 2 : 1);
    }
    body += '\n';
    char head[24];
    int n = std::snprintf(head, sizeof head, "%zx\r\n", body.size());
    std::string out;
    out.reserve(body.size() + static_cast<std::size_t>(n) + 2);
    out.append(head, static_cast<std::size_t>(n)).append(body).append("\r\n");
    return out;
}

void prepare_sse(Delivery &d, std::string_view payload, bool binary, Publisher *ids)
{
    if (binary)
        return; // an event stream carries text only: SSE subscribers do not get binary messages
    d.event_id = ids ? ids->next_event_id() : 0;
    d.sse = std::make_shared<const std::string>(encode_sse_chunk(d.event_id, payload));
}

bool add_target(Delivery &d, std::string_view text, std::string_view own, std::uint64_t self_id)
{
    const Target t = parse_target(text);
    if (t.id == 0)
        return true;
    if (!t.here(own))
        d.remote.emplace_back(text);
    else if (t.id == self_id)
        return false;
    else
        d.ids.push_back(t.id);
    return true;
}

void Hub::remember(const std::string &topic, Kept k)
{
    const std::size_t size = k.sse->size();
    // Past either bound every topic's history starts over: rare, and simpler than an LRU.
    if ((history_.size() >= history_topics_max && !history_.count(topic)) ||
        history_total_ + size > history_bytes_ * history_topics_bytes_factor) {
        history_.clear();
        history_total_ = 0;
    }
    Ring &ring = history_[topic];
    // A topic keeps at most history_limit_ events and history_bytes_ bytes: a resuming client's send queue
    // could not take more (the same bound), so more would only be memory a publisher makes the server keep.
    while (!ring.kept.empty() && (ring.kept.size() >= history_limit_ || ring.bytes + size > history_bytes_)) {
        ring.bytes -= ring.kept.front().sse->size();
        history_total_ -= ring.kept.front().sse->size();
        ring.kept.erase(ring.kept.begin());
    }
    ring.bytes += size;
    history_total_ += size;
    ring.kept.push_back(std::move(k));
}

std::vector<KeptEvent> Hub::history(const std::vector<std::string> &topics, std::uint64_t after) const
{
    std::vector<Kept> found;
    for (const auto &t : topics)
        if (auto it = history_.find(t); it != history_.end())
            for (const Kept &k : it->second.kept)
                if (k.id > after)
                    found.push_back(k);
    return in_id_order(std::move(found));
}

std::vector<KeptEvent> in_id_order(std::vector<KeptEvent> events)
{
    std::sort(events.begin(), events.end(),
              [](const KeptEvent &a, const KeptEvent &b) { return a.id < b.id; });
    events.erase(std::unique(events.begin(), events.end(),
                             [](const KeptEvent &a, const KeptEvent &b) { return a.id == b.id; }),
                 events.end());
    return events;
}

std::uint64_t sse_event_id(std::string_view chunk)
{
    const auto line = chunk.find("\r\n");
    if (line == std::string_view::npos || chunk.substr(line + 2, 4) != "id: ")
        return 0;
    std::uint64_t id = 0;
    for (std::size_t i = line + 6; i < chunk.size() && chunk[i] >= '0' && chunk[i] <= '9'; ++i)
        id = id * 10 + static_cast<std::uint64_t>(chunk[i] - '0');
    return id;
}

void Hub::deliver_topic(const Delivery &d, const std::string &name, std::uint64_t stamp)
{
    if (history_limit_ > 0 && d.sse && d.event_id != 0)
        remember(name, Kept{d.event_id, d.sse});
    auto it = topics_.find(name);
    if (it == topics_.end())
        return;
    // A receiver that ends (its queue overflowed with overflow: close) leaves the hub later, in a posted
    // step, so the list does not change under this loop.
    for (const Topic::Member &m : it->second->members) {
        if (m.conn->id() == d.exclude || m.conn->stamp == stamp)
            continue;
        m.conn->stamp = stamp;
        const auto &bytes = m.conn->sse() ? d.sse : d.frame;
        if (!bytes)
            continue; // a binary message and an SSE subscriber
        m.conn->send(bytes);
        ++stats_.delivered;
    }
}

void Hub::add(WsConn *c)
{
    conns_.emplace(c->id(), c);
}

void Hub::remove(WsConn *c)
{
    auto &ms = c->memberships();
    while (!ms.empty())
        leave(c, ms.back().topic->name);
    std::vector<Membership>().swap(ms);
    conns_.erase(c->id());
}

void Hub::join(WsConn *c, const std::string &name)
{
    auto &ms = c->memberships();
    for (const auto &m : ms)
        if (m.topic->name == name)
            return; // already there
    auto &slot = topics_[name];
    if (!slot) {
        slot = std::make_unique<Topic>();
        slot->name = name;
        if (interest_)
            interest_->interest(name, true);
    }
    Topic *t = slot.get();
    ms.push_back(Membership{t, t->members.size()});
    t->members.push_back(Topic::Member{c, ms.size() - 1});
}

void Hub::leave(WsConn *c, const std::string &name)
{
    auto &ms = c->memberships();
    for (std::size_t i = 0; i < ms.size(); ++i) {
        if (ms[i].topic->name != name)
            continue;
        Topic *t = ms[i].topic;
        // Swap-remove from the topic; the member moved into the hole has its membership re-pointed.
        std::size_t slot = ms[i].slot;
        if (slot + 1 != t->members.size()) {
            t->members[slot] = t->members.back();
            Topic::Member &moved = t->members[slot];
            moved.conn->memberships()[moved.membership].slot = slot;
        }
        t->members.pop_back();
        // The same in the connection's list.
        if (i + 1 != ms.size()) {
            ms[i] = ms.back();
            ms[i].topic->members[ms[i].slot].membership = i;
        }
        ms.pop_back();
        if (t->members.empty()) {
            if (interest_)
                interest_->interest(t->name, false);
            topics_.erase(topics_.find(t->name)); // by iterator: `name` may be the topic's own string
        }
        return;
    }
}

WsConn *Hub::find(std::uint64_t id) const
{
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : it->second;
}

std::size_t Hub::subscribers(const std::string &topic) const
{
    auto it = topics_.find(topic);
    return it == topics_.end() ? 0 : it->second->members.size();
}

void Hub::deliver(const Delivery &d)
{
    switch (d.kind) {
    case Delivery::Kind::publish: {
        ++stats_.publishes;
        const std::uint64_t stamp = ++stamp_;
        if (d.only_topic < 0) {
            for (const auto &name : d.topics)
                deliver_topic(d, name, stamp);
            break;
        }
        // Another node's copy for one of the topics: the members of the topics before it had the earlier
        // copy (this loop saw it, or that topic has no member here).
        const auto only = static_cast<std::size_t>(d.only_topic);
        if (only >= d.topics.size())
            break;
        for (std::size_t i = 0; i < only; ++i)
            if (auto it = topics_.find(d.topics[i]); it != topics_.end())
                for (const Topic::Member &m : it->second->members)
                    m.conn->stamp = stamp;
        deliver_topic(d, d.topics[only], stamp);
        break;
    }
    case Delivery::Kind::send:
        for (std::uint64_t id : d.ids)
            if (WsConn *c = find(id)) {
                const auto &bytes = c->sse() ? d.sse : d.frame;
                if (bytes) {
                    c->send(bytes);
                    ++stats_.delivered;
                }
            }
        break;
    case Delivery::Kind::close:
        for (std::uint64_t id : d.ids)
            if (WsConn *c = find(id))
                c->close(d.code, d.reason);
        break;
    }
}

} // namespace ferry::server::detail::ws
