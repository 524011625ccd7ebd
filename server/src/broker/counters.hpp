// What the broker counts and how it stands (internal to server/; docs/cluster.md, "Seeing it"): written on
// loop 0, read by /metrics and /ready on any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace ferry::server::detail::broker {

class Counters {
public:
    enum Dropped : unsigned {
        down,    // published while Redis was unreachable, or queued when the connection broke: lost
        backlog, // published faster than Redis took them (more than the send buffer held)
        invalid, // received on a channel of ours but not an envelope this node reads
        dropped_kinds
    };

    void enable(std::string driver) { driver_ = std::move(driver); } // a broker is there: /metrics shows it

    void published(std::uint64_t n = 1) { published_.fetch_add(n, std::memory_order_relaxed); }
    void received() { received_.fetch_add(1, std::memory_order_relaxed); }
    void dropped(Dropped why, std::uint64_t n = 1) { dropped_[why].fetch_add(n, std::memory_order_relaxed); }
    void reconnected() { reconnects_.fetch_add(1, std::memory_order_relaxed); }
    void subscriptions(std::size_t n) { subscriptions_.store(n, std::memory_order_relaxed); }

    // Up at `where`, or down for `why` (both said by /ready).
    void set_up(const std::string &where);
    void set_down(const std::string &why);
    bool up() const { return up_.load(std::memory_order_relaxed); }
    // "broker: redis 127.0.0.1:6379 up, 3 topic(s)" or "broker: redis down for 4 s: <why>".
    std::string line() const;

    std::uint64_t published_count() const { return published_.load(std::memory_order_relaxed); }
    std::uint64_t received_count() const { return received_.load(std::memory_order_relaxed); }
    std::uint64_t dropped_count(Dropped why) const { return dropped_[why].load(std::memory_order_relaxed); }

    void format(std::string &out) const; // Prometheus families (nothing when the broker is memory)

private:
    std::string driver_;
    std::atomic<bool> up_{false};
    std::atomic<std::uint64_t> published_{0}, received_{0}, reconnects_{0};
    std::atomic<std::uint64_t> dropped_[dropped_kinds] = {};
    std::atomic<std::size_t> subscriptions_{0};
    mutable std::mutex mu_; // the state's words
    std::string where_, why_ = "not connected yet";
    std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};

} // namespace ferry::server::detail::broker
