// What a server process has once, whatever number of pools it runs (nginx's cycle is the model): the table
// of its child processes through which the pools' reapers route exits, the table of CPUs the pools pin
// workers to, the PHP-level fork template's file in a temporary directory, and the descriptor limit workers
// start with. Built once in main and given to every pool's constructor: two pools with hosts of their own
// would each reap the other's children and lose their exits. No process state lives in statics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry::pool {

namespace detail {
class ProcessTable;
class CpuPins;
struct PreforkFile;
} // namespace detail

class Host {
public:
    // `cpus`: where workers may run (conf::usable_cpu_list() when not given); `tmp_dir`: where the fork
    // template's file goes ($TMPDIR or /tmp when empty).
    Host();
    Host(std::vector<int> cpus, std::string tmp_dir);
    ~Host();
    Host(const Host &) = delete;
    Host &operator=(const Host &) = delete;

    detail::ProcessTable &processes() const { return *processes_; }
    detail::CpuPins &cpus() const { return *cpus_; }
    // The embedded prefork.php written to a directory of its own (mode 0700) when first asked for, removed
    // with the Host. Thread-safe: any loop may be the first to ask.
    const detail::PreforkFile &prefork_file() const;
    const std::string &tmp_dir() const { return tmp_dir_; }
    // The soft RLIMIT_NOFILE workers start with: the one the server had before it raised its own
    // (worker_limit(raise_descriptor_limit()), ferry/pool/descriptors.hpp); 0: they inherit the server's. Set
    // once before any worker starts.
    void set_worker_descriptor_limit(std::uint64_t soft) { worker_nofile_ = soft; }
    std::uint64_t worker_descriptor_limit() const { return worker_nofile_; }

private:
    std::unique_ptr<detail::ProcessTable> processes_;
    std::unique_ptr<detail::CpuPins> cpus_;
    std::string tmp_dir_;
    std::uint64_t worker_nofile_ = 0;
    struct Lazy;
    std::unique_ptr<Lazy> lazy_;
};

} // namespace ferry::pool
