// A byte budget shared by every connection (and, later, every event loop): how much request and response
// body memory may be in flight at once. Thread-safe; a Reservation gives its bytes back when destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace ferry::pool {

class Budget {
public:
    explicit Budget(std::uint64_t limit) : limit_(limit) {}
    Budget(const Budget &) = delete;
    Budget &operator=(const Budget &) = delete;

    // Takes n bytes if they fit; false (nothing taken) if they do not.
    bool try_take(std::uint64_t n)
    {
        std::uint64_t used = used_.load(std::memory_order_relaxed);
        do {
            if (n > limit_ || used > limit_ - n)
                return false;
        } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
        return true;
    }
    void give(std::uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
    std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }
    std::uint64_t limit() const { return limit_; }

private:
    const std::uint64_t limit_;
    std::atomic<std::uint64_t> used_{0};
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

} // namespace ferry::pool
