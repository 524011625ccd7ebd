#include "ws/budget.hpp"

#include "ferry/base/log.hpp"

#include <chrono>

namespace ferry::server::detail::ws {

void WsBudgets::report(Kind kind, const std::string &line)
{
    if (kind == kind_message_timeout)
        message_timeouts.fetch_add(1, std::memory_order_relaxed);
    else
        refusals[kind].fetch_add(1, std::memory_order_relaxed);
    const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count();
    std::int64_t next = next_log_ns_[kind].load(std::memory_order_relaxed);
    if (now < next ||
        !next_log_ns_[kind].compare_exchange_strong(next, now + 1'000'000'000, std::memory_order_relaxed)) {
        unlogged_[kind].fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const std::uint64_t more = unlogged_[kind].exchange(0, std::memory_order_relaxed);
    log::warn("ws", more == 0 ? line
                              : line + " (and " + std::to_string(more) +
                                    " more like it in the last second, not logged)");
}

void warn_unreceivable(const conf::WebsocketsConfig &c)
{
    if (c.max_assembly_memory != 0 && c.max_assembly_memory < c.max_message_size)
        log::warn("ws", "websockets.max_assembly_memory (" + std::to_string(c.max_assembly_memory) +
                            " bytes) is below max_message_size (" + std::to_string(c.max_message_size) +
                            "): a message that large arriving in parts can never be received");
}

} // namespace ferry::server::detail::ws
