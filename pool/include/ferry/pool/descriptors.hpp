// The process's descriptor limit (RLIMIT_NOFILE). The server raises its soft limit to the hard one at start,
// as Go programs and nginx's worker_rlimit_nofile do: a soft limit of 1024 (or 128) is far below what a
// server of many connections and cached files needs. Workers start with the soft limit the server had: PHP
// extensions built on select() fail on descriptors above 1024 (Go restores it for its children too).
#pragma once

#include <cstdint>

namespace ferry::pool {

struct DescriptorLimit {
    std::uint64_t before = 0; // the soft limit the process started with
    std::uint64_t soft = 0;   // the soft limit now
    std::uint64_t hard = 0;
    int error = 0; // errno of a failed getrlimit/setrlimit (then soft == before)
};

// Raises the soft RLIMIT_NOFILE to the hard one (at most /proc/sys/fs/nr_open when the hard one is
// unlimited). Call once, before any worker starts, and give the Host what workers start with
// (Host::set_worker_descriptor_limit(worker_limit())).
DescriptorLimit raise_descriptor_limit();

// The soft limit workers are to start with after `l`: the one before, when it was raised; 0 (they inherit
// the server's) when nothing changed.
inline std::uint64_t worker_limit(const DescriptorLimit &l)
{
    return l.soft > l.before ? l.before : 0;
}

} // namespace ferry::pool
