#include "process_table.hpp"

#include <algorithm>

namespace ferry::pool::detail {

Result<int> ProcessTable::start(ExitListener &owner, unsigned part, const std::function<Result<int>()> &start)
{
    std::lock_guard lock(mu_);
    auto pid = start();
    if (pid)
        owners_.insert_or_assign(*pid, Owner{&owner, part});
    return pid;
}

std::optional<int> ProcessTable::claim(int pid, ExitListener &owner, unsigned part)
{
    std::lock_guard lock(mu_);
    auto it =
        std::find_if(unclaimed_.begin(), unclaimed_.end(), [pid](const auto &u) { return u.pid == pid; });
    if (it != unclaimed_.end()) {
        const int status = it->status;
        unclaimed_.erase(it);
        return status;
    }
    owners_.insert_or_assign(pid, Owner{&owner, part});
    return std::nullopt;
}

void ProcessTable::forget(int pid)
{
    std::lock_guard lock(mu_);
    owners_.erase(pid);
}

void ProcessTable::forget_all(const ExitListener &owner)
{
    std::lock_guard lock(mu_);
    std::erase_if(owners_, [&owner](const auto &kv) { return kv.second.listener == &owner; });
}

void ProcessTable::for_each(const ExitListener &owner, const std::function<void(int)> &f)
{
    std::lock_guard lock(mu_);
    for (const auto &[pid, o] : owners_)
        if (o.listener == &owner)
            f(pid);
}

void ProcessTable::for_each(const ExitListener &owner, unsigned part, const std::function<void(int)> &f)
{
    std::lock_guard lock(mu_);
    for (const auto &[pid, o] : owners_)
        if (o.listener == &owner && o.part == part)
            f(pid);
}

void ProcessTable::reaped(int pid, int status, std::chrono::steady_clock::time_point now)
{
    Owner owner;
    {
        std::lock_guard lock(mu_);
        auto it = owners_.find(pid);
        if (it == owners_.end()) {
            while (!unclaimed_.empty() &&
                   (unclaimed_.size() >= max_unclaimed || now - unclaimed_.front().at > unclaimed_for))
                unclaimed_.pop_front();
            unclaimed_.push_back({pid, status, now});
            return;
        }
        owner = it->second;
        owners_.erase(it);
    }
    owner.listener->exited(pid, status, owner.part);
}

} // namespace ferry::pool::detail
