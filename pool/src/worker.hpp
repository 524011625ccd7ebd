// One worker process and its duplex frame channel over stdin/stdout (internal to pool/).
#pragma once

#include "ferry/pool/asio.hpp"
#include "ferry/relay/context.hpp"
#include "ferry/relay/frame.hpp"

#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::pool {

// spawning → ready → working → ready | stopping → dead (RoadRunner's worker states, design §3).
enum class State { spawning, ready, working, stopping, dead };

const char *state_name(State s);
// "exited with code 3", "killed by signal 9 (SIGKILL)".
std::string describe_status(int wait_status);

struct Worker {
    explicit Worker(asio::io_context &io) : in(io), out(io), err(io), exit_timer(io) {}

    int pid = 0;
    State state = State::spawning;
    asio::writable_pipe in;  // request frames (non-blocking: written with write_all_fast)
    asio::readable_pipe out; // response frames only
    asio::readable_pipe err; // the worker's log
    relay::Codec codec = relay::Codec::json;
    std::string wbuf; // the request context being encoded
    std::uint64_t jobs = 0;
    std::uint64_t max_jobs = 0;   // with jitter; 0 = unlimited
    bool retire = false;          // recycle as soon as a replacement is ready
    bool stop_on_release = false; // stop when the current request is done
    bool exited = false;
    int wait_status = 0;
    asio::steady_timer exit_timer; // cancelled by the reaper when the process is gone
    std::chrono::system_clock::time_point created = std::chrono::system_clock::now();
    std::string stderr_tail; // last bytes of stderr, for boot error messages

    std::string tag() const { return "worker " + std::to_string(pid); }

    // Reads one whole frame; `payload` points into the read buffer until consume_frame(). False with `error`
    // set on EOF, a read error, or bytes that are not a frame (quoted, e.g. a stray echo).
    awaitable<bool> read_frame(relay::FrameHeader &h, std::string_view &payload, std::string &error,
                               std::uint32_t max_payload);
    void consume_frame();
    awaitable<bool> write_all(const std::string &bytes);
    // Signals the worker's process group (its children too); nothing once it has exited.
    void signal(int sig) const;

private:
    std::vector<char> rbuf_ = std::vector<char>(16 * 1024);
    std::size_t rpos_ = 0, rend_ = 0, frame_end_ = 0;
};

using WorkerPtr = std::shared_ptr<Worker>;

} // namespace ferry::pool
