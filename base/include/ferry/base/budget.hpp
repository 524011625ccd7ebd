// A byte budget shared by every connection of every event loop: how much request and response body memory
// may be in flight at once (http.limits.max_body_memory), and the same kind of counter for request heads
// (max_head_memory) and WebSocket messages and send queues (websockets.max_assembly_memory,
// max_send_queue_memory). Thread-safe, lock-free; a Reservation gives its bytes back when destroyed. A
// limit of 0 counts without refusing (try_take; a config key's "0 = no limit").
//
// Request bodies take from it under two more rules (take_request), so that a few clients cannot take it all
// (docs/architecture.md, "Budgets"): a connection holds at most share() bytes (1/8 of the budget, at least
// small_body); and past its first small_body bytes a body takes only from the first 7/8 of the budget, so
// the last 1/8 stays for small bodies (a form, a JSON request) of other clients.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace ferry {

class Budget {
public:
    explicit Budget(std::uint64_t limit) : limit_(limit) {}
    Budget(const Budget &) = delete;
    Budget &operator=(const Budget &) = delete;

    // Takes n bytes if they fit; false (nothing taken) if they do not.
    bool try_take(std::uint64_t n)
    {
        if (limit_ == 0) {
            take(n);
            return true;
        }
        std::uint64_t used = used_.load(std::memory_order_relaxed);
        do {
            if (n > limit_ || used > limit_ - n)
                return false;
        } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
        return true;
    }
    enum class Take { ok, over_share, spent };
    static constexpr std::uint64_t small_body = 64 * 1024;
    std::uint64_t share() const { return limit_ / 8 > small_body ? limit_ / 8 : small_body; }
    // Takes n more bytes for a request body that holds `held` already (see above).
    Take take_request(std::uint64_t n, std::uint64_t held)
    {
        if (held + n <= small_body)
            return try_take(n) ? Take::ok : deny(Take::spent);
        if (held + n > share())
            return deny(Take::over_share);
        const std::uint64_t cap = limit_ - limit_ / 8;
        std::uint64_t used = used_.load(std::memory_order_relaxed);
        do {
            if (n > cap || used > cap - n)
                return deny(Take::spent);
        } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
        return Take::ok;
    }
    // How often take_request() said over_share or spent (for /metrics).
    std::uint64_t denied(Take why) const
    {
        return why == Take::over_share ? denied_share_.load(std::memory_order_relaxed)
                                       : denied_spent_.load(std::memory_order_relaxed);
    }
    // Takes n bytes even past the limit (a WebSocket frame already begun, a control frame): callers bound it.
    void take(std::uint64_t n) { used_.fetch_add(n, std::memory_order_relaxed); }
    void give(std::uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
    std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
    std::uint64_t limit() const { return limit_; }

private:
    Take deny(Take why)
    {
        (why == Take::over_share ? denied_share_ : denied_spent_).fetch_add(1, std::memory_order_relaxed);
        return why;
    }

    const std::uint64_t limit_;
    std::atomic<std::uint64_t> used_{0};
    std::atomic<std::uint64_t> denied_share_{0}, denied_spent_{0};
};

// Bytes held from a Budget; movable, returns them when destroyed or reset.
class Reservation {
public:
    Reservation() = default;
    Reservation(Budget &b, std::uint64_t n) : budget_(&b), bytes_(n) {}
    Reservation(Reservation &&o) noexcept
        : budget_(std::exchange(o.budget_, nullptr)), bytes_(std::exchange(o.bytes_, 0))
    {
    }
    Reservation &operator=(Reservation &&o) noexcept
    {
        if (this != &o) {
            reset();
            budget_ = std::exchange(o.budget_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    ~Reservation() { reset(); }

    // Tries to take n more bytes into this reservation.
    bool grow(Budget &b, std::uint64_t n)
    {
        if (budget_ && budget_ != &b)
            return false;
        if (!b.try_take(n))
            return false;
        budget_ = &b;
        bytes_ += n;
        return true;
    }
    // The same for a request body (Budget::take_request: the connection's share, the reserve for small ones).
    Budget::Take grow_request(Budget &b, std::uint64_t n)
    {
        if (budget_ && budget_ != &b)
            return Budget::Take::spent;
        auto t = b.take_request(n, bytes_);
        if (t != Budget::Take::ok)
            return t;
        budget_ = &b;
        bytes_ += n;
        return t;
    }
    // Gives back what it holds beyond n bytes.
    void shrink_to(std::uint64_t n)
    {
        if (budget_ && bytes_ > n) {
            budget_->give(bytes_ - n);
            bytes_ = n;
        }
    }
    void reset()
    {
        if (budget_ && bytes_)
            budget_->give(bytes_);
        budget_ = nullptr;
        bytes_ = 0;
    }
    std::uint64_t bytes() const { return bytes_; }

private:
    Budget *budget_ = nullptr;
    std::uint64_t bytes_ = 0;
};

} // namespace ferry
