// The event loop (internal to server/): an io_context that can destroy its pending handlers early.
#pragma once

#include "ferry/base/io.hpp"

namespace ferry::server::detail {

class Loop : public asio::io_context {
public:
    // One thread runs the loop and touches its sockets, pipes and timers, so the reactor needs no lock per
    // operation (UNSAFE_IO); the scheduler keeps its lock, so other threads may still post to it.
    Loop() : asio::io_context(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO) {}

    // Destroys every pending handler and suspended coroutine now: LoopThreads' fallback for a loop stopped
    // with a task its owner did not end (a warning says so; the tests fail on it). The io_context's
    // destructor would do it too, but only after the objects their frames refer to are gone. Idempotent.
    void destroy_handlers() { shutdown(); }
};

} // namespace ferry::server::detail
