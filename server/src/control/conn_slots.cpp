#include "control/conn_slots.hpp"

#include "ferry/base/log.hpp"

#include <utility>

namespace ferry::server::detail {

namespace {

constexpr auto log_every = std::chrono::seconds(10);

} // namespace

const char *listener_name(ControlListener l)
{
    switch (l) {
    case ControlListener::rpc:
        return "rpc";
    case ControlListener::status:
        return "status";
    case ControlListener::metrics:
        return "metrics";
    }
    return "?";
}

const char *reason_name(CloseReason r)
{
    switch (r) {
    case CloseReason::idle:
        return "idle";
    case CloseReason::first_byte_timeout:
        return "first_byte_timeout";
    case CloseReason::limit:
        return "limit";
    }
    return "?";
}

ControlClosed ControlCounters::snapshot() const
{
    ControlClosed out;
    for (unsigned l = 0; l < control_listeners; ++l)
        for (unsigned r = 0; r < close_reasons; ++r)
            out.n[l][r] = n_[l][r].load(std::memory_order_relaxed);
    return out;
}

ConnSlots::Lease::~Lease()
{
    if (!owner_)
        return;
    if (!it_->closing)
        --owner_->live_;
    owner_->slots_.erase(it_);
}

ConnSlots::ConnSlots(ControlCounters &counters, ControlListener which, unsigned max, std::string component)
    : counters_(counters), which_(which), max_(max), component_(std::move(component))
{
}

void ConnSlots::note(CloseReason r, const std::string &what)
{
    counters_.count(which_, r);
    const auto i = static_cast<unsigned>(r);
    const auto now = Clock::now();
    if (now - last_log_[i] < log_every) {
        ++unlogged_[i];
        return;
    }
    std::string line = what;
    if (unlogged_[i] > 0)
        line += " (and " + std::to_string(unlogged_[i]) + " more like it since the last such line)";
    last_log_[i] = now;
    unlogged_[i] = 0;
    log::warn(component_, line);
}

std::unique_ptr<ConnSlots::Lease> ConnSlots::admit(const std::string &peer, std::function<void()> close)
{
    if (live_ >= max_) {
        // The oldest idle connection: one that never spoke first, then the one idle the longest.
        auto victim = slots_.end();
        for (auto it = slots_.begin(); it != slots_.end(); ++it) {
            if (it->closing || it->busy)
                continue;
            if (victim == slots_.end() || (!it->spoke && victim->spoke) ||
                (it->spoke == victim->spoke && it->since < victim->since))
                victim = it;
        }
        if (victim == slots_.end()) {
            note(CloseReason::limit,
                 peer + ": " + std::to_string(max_) + " connections are busy; refusing this one");
            return nullptr;
        }
        const auto idle_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - victim->since).count();
        victim->closing = true;
        --live_;
        note(CloseReason::idle, std::to_string(max_) + " connections are open: closed the oldest idle one (" +
                                    (victim->spoke ? "idle" : "silent") + " for " + std::to_string(idle_ms) +
                                    " ms) to make room for " + peer);
        auto close_it = std::move(victim->close);
        victim->close = nullptr;
        if (close_it)
            close_it();
    }
    slots_.push_back(Slot{std::move(close), Clock::now()});
    ++live_;
    return std::make_unique<Lease>(this, std::prev(slots_.end()));
}

void ConnSlots::close_all()
{
    for (auto &s : slots_) {
        if (s.closing)
            continue;
        s.closing = true;
        --live_;
        if (auto close = std::exchange(s.close, nullptr))
            close();
    }
}

void ConnSlots::first_byte_timeout(const std::string &peer)
{
    note(CloseReason::first_byte_timeout,
         peer + ": no byte within " + listener_name(which_) + ".first_byte_timeout; closed the connection");
}

} // namespace ferry::server::detail
