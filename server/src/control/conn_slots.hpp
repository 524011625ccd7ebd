// The connection slots of one control listener (rpc.listen, status.address, metrics.address; internal to
// server/): at most `max` connections at once, and idle sockets must not lock callers out. A connection
// that sends no byte within the listener's first_byte_timeout is closed; when every slot is taken, the
// oldest idle connection is closed to make room for the new one (one that never sent a byte first, then the
// one idle the longest) rather than the new one being refused. Only when every connection is busy (a call
// or request being answered) is the new one refused. Each close is counted per listener and reason
// (ferry_control_connections_closed_total) and logged at most once per 10 s per listener and reason.
// Everything runs on loops[0]; the counters are read by /metrics on the same loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

namespace ferry::server::detail {

enum class ControlListener : unsigned { rpc, status, metrics };
enum class CloseReason : unsigned {
    idle,               // closed to make room for a new connection
    first_byte_timeout, // no byte within first_byte_timeout
    limit,              // refused: every slot held by a busy connection
};
inline constexpr unsigned control_listeners = 3, close_reasons = 3;
const char *listener_name(ControlListener l);
const char *reason_name(CloseReason r);

// A plain snapshot for format_metrics.
struct ControlClosed {
    std::uint64_t n[control_listeners][close_reasons] = {};
};
// The control listeners' closes, server-wide (ServerCounters). Written on loops[0] only (load + store, no
// read-modify-write), read by /metrics there too; atomics keep a scrape from another thread (a test) defined.
class ControlCounters {
public:
    void count(ControlListener l, CloseReason r)
    {
        auto &c = n_[static_cast<unsigned>(l)][static_cast<unsigned>(r)];
        c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    ControlClosed snapshot() const;

private:
    std::atomic<std::uint64_t> n_[control_listeners][close_reasons] = {};
};

class ConnSlots {
public:
    using Clock = std::chrono::steady_clock;
    struct Slot {
        std::function<void()> close; // closes the socket (the session then ends and releases the slot)
        Clock::time_point since;     // accepted, or idle since
        bool spoke = false;          // a byte came
        bool busy = false;           // a call or request is being answered
        bool closing = false;        // closed to make room: no longer counted
    };
    // RAII: the slot is released when the session's last holder goes.
    class Lease {
    public:
        Lease() = default;
        Lease(ConnSlots *owner, std::list<Slot>::iterator it) : owner_(owner), it_(it) {}
        Lease(Lease &&o) noexcept : owner_(o.owner_), it_(o.it_) { o.owner_ = nullptr; }
        Lease &operator=(Lease &&) = delete;
        ~Lease();
        Slot &slot() { return *it_; }
        void spoke() { it_->spoke = true; }
        void busy(bool b)
        {
            it_->busy = b;
            if (!b)
                it_->since = Clock::now();
        }
        // No byte came within the listener's first_byte_timeout (its session closes the socket itself).
        void first_byte_timeout(const std::string &peer) { owner_->first_byte_timeout(peer); }

    private:
        ConnSlots *owner_ = nullptr;
        std::list<Slot>::iterator it_;
    };

    // `counters`: where its closes are counted (outlives it).
    ConnSlots(ControlCounters &counters, ControlListener which, unsigned max, std::string component);
    ConnSlots(const ConnSlots &) = delete;
    ConnSlots &operator=(const ConnSlots &) = delete;

    // A new connection from `peer`: a lease when there is room (an idle connection may have been closed for
    // it), an empty pointer when it must be refused.
    std::unique_ptr<Lease> admit(const std::string &peer, std::function<void()> close);
    // The session saw no byte within first_byte_timeout (it closes the socket itself).
    void first_byte_timeout(const std::string &peer);
    unsigned live() const { return live_; }
    // The listener stops: every connection it holds is closed (busy ones too); their sessions end and
    // release their slots. Not counted as a close.
    void close_all();

private:
    void note(CloseReason r, const std::string &what);
    ControlCounters &counters_;
    ControlListener which_;
    unsigned max_;
    std::string component_;
    std::list<Slot> slots_;
    unsigned live_ = 0; // slots not closing
    Clock::time_point last_log_[close_reasons] = {};
    std::uint64_t unlogged_[close_reasons] = {};
};

} // namespace ferry::server::detail
