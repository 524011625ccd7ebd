#include "broker/counters.hpp"

#include "control/exposition.hpp"

namespace ferry::server::detail::broker {

void Counters::set_up(const std::string &where)
{
    std::lock_guard lock(mu_);
    where_ = where;
    since_ = std::chrono::steady_clock::now();
    up_.store(true, std::memory_order_relaxed);
}

void Counters::set_down(const std::string &why)
{
    std::lock_guard lock(mu_);
    if (up_.load(std::memory_order_relaxed) || why_ != why)
        since_ = std::chrono::steady_clock::now();
    why_ = why;
    up_.store(false, std::memory_order_relaxed);
}

std::string Counters::line() const
{
    std::lock_guard lock(mu_);
    const auto s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since_);
    if (up_.load(std::memory_order_relaxed))
        return "broker: " + driver_ + " " + where_ + " up, " +
               std::to_string(subscriptions_.load(std::memory_order_relaxed)) + " topic(s) subscribed";
    return "broker: " + driver_ + " down for " + std::to_string(s.count()) + " s: " + why_;
}

void Counters::format(std::string &out) const
{
    if (driver_.empty())
        return; // the memory broker: nothing crosses nodes
    family(out, "ferry_broker_up", "gauge", "1 while the broker (websockets.broker) is connected.");
    sample(out, "ferry_broker_up", "", up() ? 1 : 0);
    family(out, "ferry_broker_messages_total", "counter",
           "Messages this node sent to the broker (published) and took from it for its connections "
           "(received; its own copies not counted).");
    sample(out, "ferry_broker_messages_total", "direction=\"published\"",
           static_cast<double>(published_count()));
    sample(out, "ferry_broker_messages_total", "direction=\"received\"",
           static_cast<double>(received_count()));
    family(out, "ferry_broker_dropped_total", "counter",
           "Messages that did not cross nodes: down (the broker unreachable; never sent later), backlog "
           "(published faster than the broker took them), invalid (received, not readable).");
    static const char *reasons[] = {"down", "backlog", "invalid"};
    for (unsigned i = 0; i < dropped_kinds; ++i)
        sample(out, "ferry_broker_dropped_total", std::string("reason=\"") + reasons[i] + "\"",
               static_cast<double>(dropped_count(static_cast<Dropped>(i))));
    family(out, "ferry_broker_reconnects_total", "counter",
           "Connections to the broker made again after a loss.");
    sample(out, "ferry_broker_reconnects_total", "",
           static_cast<double>(reconnects_.load(std::memory_order_relaxed)));
    family(out, "ferry_broker_subscriptions", "gauge",
           "Topics this node is subscribed to (its connections' topics).");
    sample(out, "ferry_broker_subscriptions", "",
           static_cast<double>(subscriptions_.load(std::memory_order_relaxed)));
}

} // namespace ferry::server::detail::broker
