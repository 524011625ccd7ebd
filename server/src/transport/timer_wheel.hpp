// Connection deadlines in a hashed timer wheel (internal to server/). Setting, moving or clearing a
// deadline is O(1) and touches no system timer; one coarse tick visits only the slot that came due, so an
// idle connection costs one visit per timeout period, not one per tick.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::server::detail {

using steady = std::chrono::steady_clock;

// What the wheel links; embed it in the object that owns a deadline.
struct WheelEntry {
    steady::time_point deadline = steady::time_point::max(); // max = none
    WheelEntry *prev = nullptr, *next = nullptr;
    std::uint64_t due_tick = 0; // the tick whose slot holds this entry
    bool linked = false;
};

class TimerWheel {
public:
    explicit TimerWheel(std::chrono::milliseconds tick = std::chrono::milliseconds(250),
                        std::size_t slots = 512, steady::time_point origin = steady::now());
    TimerWheel(const TimerWheel &) = delete;
    TimerWheel &operator=(const TimerWheel &) = delete;

    // Sets the entry's deadline. A later deadline leaves the entry where it is (it moves when its slot comes
    // due); an earlier one moves it now.
    void schedule(WheelEntry &e, steady::time_point deadline);
    // No deadline (the entry leaves the wheel lazily, when its slot comes due).
    void cancel(WheelEntry &e) { e.deadline = steady::time_point::max(); }
    // Unlinks the entry (before it is destroyed).
    void remove(WheelEntry &e);

    // Visits every slot up to `now`: entries whose deadline passed are unlinked and given to `expire`;
    // the others move to the slot of their deadline. `expire` may call schedule() or remove().
    template <typename F> void advance(steady::time_point now, F &&expire)
    {
        const std::uint64_t until = tick_of(now);
        while (next_tick_ <= until) {
            WheelEntry &head = slots_[next_tick_ % slots_.size()];
            ++next_tick_;
            WheelEntry *e = head.next;
            // Detach the slot's list first: entries that move are relinked into other slots (or this one,
            // for a later round) while we walk.
            head.next = head.prev = &head;
            while (e != &head) {
                WheelEntry *after = e->next;
                e->linked = false;
                --size_;
                ++visits_;
                if (e->deadline != steady::time_point::max()) {
                    if (e->deadline <= now)
                        expire(*e);
                    else
                        link(*e, e->deadline);
                }
                e = after;
            }
        }
    }

    std::size_t size() const { return size_; }       // linked entries (for tests)
    std::uint64_t visits() const { return visits_; } // entries looked at by advance() (for tests)
    std::chrono::milliseconds tick() const { return tick_; }

private:
    std::uint64_t tick_of(steady::time_point t) const;
    void link(WheelEntry &e, steady::time_point deadline);

    std::chrono::milliseconds tick_;
    steady::time_point origin_;
    std::vector<WheelEntry> slots_; // list heads
    std::uint64_t next_tick_ = 0;   // the next tick to visit
    std::size_t size_ = 0;
    std::uint64_t visits_ = 0;
};

} // namespace ferry::server::detail
