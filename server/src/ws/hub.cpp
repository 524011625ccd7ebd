#include "ws/hub.hpp"

#include "ws/connection.hpp"

namespace ferry::server::detail::ws {

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
        if (t->members.empty())
            topics_.erase(topics_.find(t->name)); // by iterator: `name` may be the topic's own string
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
        for (const auto &name : d.topics) {
            auto it = topics_.find(name);
            if (it == topics_.end())
                continue;
            // A receiver that ends (its queue overflowed with overflow: close) leaves the hub later, in a
            // posted step, so the list does not change under this loop.
            for (const Topic::Member &m : it->second->members) {
                if (m.conn->id() == d.exclude || m.conn->stamp == stamp)
                    continue;
                m.conn->stamp = stamp;
                m.conn->send(d.frame);
                ++stats_.delivered;
            }
        }
        break;
    }
    case Delivery::Kind::send:
        for (std::uint64_t id : d.ids)
            if (WsConn *c = find(id)) {
                c->send(d.frame);
                ++stats_.delivered;
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
