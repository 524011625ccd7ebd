// The server-wide memory budgets of WebSocket connections (internal to server/; docs/architecture.md,
// "WebSockets"): the bytes of client messages being assembled (websockets.max_assembly_memory) and the bytes
// waiting in send queues (websockets.max_send_queue_memory), each one counter shared by every loop, with
// what /metrics shows of them and the rate-limited log line of a refusal.
#pragma once

#include "ferry/base/budget.hpp"
#include "ferry/conf/config.hpp"

#include <atomic>
#include <cstdint>
#include <string>

namespace ferry::server::detail::ws {

// Bytes held against a limit by all loops (lock-free). A limit of 0 counts without refusing.
using ByteBudget = Budget;

// What every loop's connections share: the budgets and their counters (read by /metrics).
struct WsBudgets {
    explicit WsBudgets(const conf::WebsocketsConfig &c)
        : assembly(c.max_assembly_memory), send_queue(c.max_send_queue_memory)
    {
    }
    enum Kind : unsigned { kind_assembly = 0, kind_send_queue = 1, kind_message_timeout = 2 };

    ByteBudget assembly;   // capacity of the buffers of messages (or frames) received in part
    ByteBudget send_queue; // bytes waiting in send queues (a frame shared by several queues counts in each)
    std::atomic<std::uint64_t> refusals[2] = {}; // by Kind: messages dropped or connections closed
    std::atomic<std::uint64_t> message_timeouts{0};

    // Counts the event, and logs `line` at warn unless a line of the same kind was logged less than a
    // second ago (the next line says how many were not logged).
    void report(Kind kind, const std::string &line);

private:
    std::atomic<std::int64_t> next_log_ns_[3] = {};
    std::atomic<std::uint64_t> unlogged_[3] = {};
};

// A warning when max_assembly_memory is below max_message_size: such a message, arriving in parts, could
// never be received.
void warn_unreceivable(const conf::WebsocketsConfig &c);

} // namespace ferry::server::detail::ws
