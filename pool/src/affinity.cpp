#include "affinity.hpp"

#include "ferry/conf/config.hpp"

#include <algorithm>
#include <sched.h>

namespace ferry::pool::detail {

CpuPins::CpuPins(std::vector<int> cpus, Apply apply) : cpus_(std::move(cpus)), apply_(std::move(apply))
{
    if (!apply_)
        apply_ = [](int pid, int cpu) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return ::sched_setaffinity(pid, sizeof one, &one) == 0;
        };
}

CpuPins &CpuPins::process()
{
    static CpuPins table(conf::usable_cpu_list());
    return table;
}

std::optional<int> CpuPins::pin(int pid)
{
    std::lock_guard lock(mu_);
    if (cpus_.empty())
        return std::nullopt;
    counted_.erase(pid);
    std::vector<unsigned> load(cpus_.size(), 0);
    for (const auto &[p, cpu] : counted_) {
        auto it = std::find(cpus_.begin(), cpus_.end(), cpu);
        if (it != cpus_.end())
            ++load[static_cast<std::size_t>(it - cpus_.begin())];
    }
    const auto best = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    if (!apply_(pid, cpus_[best]))
        return std::nullopt;
    counted_[pid] = cpus_[best];
    return cpus_[best];
}

void CpuPins::release(int pid)
{
    std::lock_guard lock(mu_);
    counted_.erase(pid);
}

unsigned CpuPins::counted(int cpu) const
{
    std::lock_guard lock(mu_);
    return static_cast<unsigned>(
        std::count_if(counted_.begin(), counted_.end(), [cpu](const auto &e) { return e.second == cpu; }));
}

bool CpuPins::reserve(unsigned n, unsigned &others)
{
    std::lock_guard lock(mu_);
    others = reserved_;
    if (reserved_ + n > cpus_.size())
        return false;
    reserved_ += n;
    return true;
}

void CpuPins::unreserve(unsigned n)
{
    std::lock_guard lock(mu_);
    reserved_ -= std::min(n, reserved_);
}

} // namespace ferry::pool::detail
