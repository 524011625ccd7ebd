#include "affinity.hpp"

#include <algorithm>
#include <sched.h>

namespace ferry::pool::detail {

CpuPins::CpuPins(std::vector<int> cpus, Apply apply)
    : cpus_(std::move(cpus)), apply_(std::move(apply)), all_(cpu_mask(cpus_))
{
    if (!apply_)
        apply_ = [](int pid, int cpu) {
            const cpu_set_t one = cpu_mask({cpu});
            return ::sched_setaffinity(pid, sizeof one, &one) == 0;
        };
}

std::optional<int> CpuPins::pin(int pid, const std::vector<int> &within)
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
    // The even spread first (no CPU gets a second worker while one has none); among the least loaded CPUs,
    // one of `within` if there is one, the lowest first.
    const unsigned least = *std::min_element(load.begin(), load.end());
    std::size_t best = cpus_.size();
    for (std::size_t i = 0; i < cpus_.size(); ++i) {
        if (load[i] != least)
            continue;
        const bool preferred = std::find(within.begin(), within.end(), cpus_[i]) != within.end();
        if (best == cpus_.size() ||
            (preferred && std::find(within.begin(), within.end(), cpus_[best]) == within.end()))
            best = i;
        if (preferred)
            break;
    }
    if (!apply_(pid, cpus_[best]))
        return std::nullopt;
    counted_[pid] = cpus_[best];
    return cpus_[best];
}

std::vector<int> CpuPins::loop_cpus(const std::vector<int> &cpus, unsigned loop, unsigned loops)
{
    std::vector<int> out;
    if (loops < 2 || loops > cpus.size() || loop >= loops)
        return out;
    for (std::size_t p = loop; p < cpus.size(); p += loops)
        out.push_back(cpus[p]);
    return out;
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

bool CpuPins::reserve(unsigned n, unsigned &others, const std::function<bool(unsigned free)> &fits)
{
    std::lock_guard lock(mu_);
    others = reserved_;
    const auto free = static_cast<unsigned>(cpus_.size() - std::min<std::size_t>(reserved_, cpus_.size()));
    if (fits ? !fits(free) : n > free)
        return false;
    reserved_ += n;
    return true;
}

void CpuPins::unreserve(unsigned n)
{
    std::lock_guard lock(mu_);
    reserved_ -= std::min(n, reserved_);
}

cpu_set_t cpu_mask(const std::vector<int> &cpus)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus)
        if (c >= 0 && c < CPU_SETSIZE)
            CPU_SET(c, &set);
    return set;
}

std::string cpu_list(const std::vector<int> &cpus)
{
    std::string out;
    for (int c : cpus)
        out += (out.empty() ? "" : ",") + std::to_string(c);
    return out;
}

} // namespace ferry::pool::detail
