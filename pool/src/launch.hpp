// Starting one worker process without a fork: clone(CLONE_VM | CLONE_VFORK), then exec (internal to pool/;
// docs/architecture.md, "Workers"). The spawner (spawner.hpp) decides when; this only starts the process.
#pragma once

#include "ferry/base/result.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>

#include <cstdint>
#include <sched.h>
#include <string>
#include <vector>

namespace ferry::pool::detail {

// PATH lookup as execvp does; a name with '/' is returned as is. "" when not found.
std::string find_executable(const std::string &name);

// The server's environment with `extra` ("K=V") entries added or replacing same-named ones.
std::vector<std::string> build_environment(const std::vector<std::string> &extra);

// What a child starts with that is the process's, not the launching thread's: the Host knows both
// (Spawner::inherit()).
struct Inherit {
    // The CPUs the child starts on (CpuPins::spawn_affinity(): every CPU once the launching loop's thread is
    // pinned to its own); nullptr: the launching thread's.
    const cpu_set_t *affinity = nullptr;
    // The soft RLIMIT_NOFILE the server started with, when it raised its own
    // (Host::worker_descriptor_limit()); 0: the child keeps the server's.
    std::uint64_t nofile = 0;
};

// Spawns `exe args...` in its own process group with stdin/stdout/stderr on the given pipes.
// The child dies with the server (PR_SET_PDEATHSIG), inherits no other fd, and has default signal
// dispositions. `in` is left non-blocking. `extra_fd` (a fork template's control socket, docs/protocol.md §8)
// becomes the child's fd 3. Returns the pid, or an error naming the command.
Result<int> launch(const std::string &exe, const std::vector<std::string> &args,
                   const std::vector<std::string> &env, boost::asio::writable_pipe &in,
                   boost::asio::readable_pipe &out, boost::asio::readable_pipe &err, int extra_fd = -1,
                   const Inherit &inherit = {});
// The same on descriptors of the caller's: the child's ends of its stdin, stdout and stderr (they stay the
// caller's to close).
Result<int> launch(const std::string &exe, const std::vector<std::string> &args,
                   const std::vector<std::string> &env, int in_fd, int out_fd, int err_fd,
                   const Inherit &inherit = {});

} // namespace ferry::pool::detail
