// The event loop (internal to server/): an io_context that can destroy its pending handlers early.
#pragma once

#include "ferry/relay/io.hpp"

namespace ferry::server::detail {

class Loop : public asio::io_context {
public:
    Loop() : asio::io_context(1) {}

    // Destroys every pending handler and suspended coroutine now. The io_context's destructor would do it
    // too, but only after the objects their frames refer to (connection lists, the pool) are gone: a stop
    // by a second signal, with requests in flight, then wrote into freed memory. Idempotent.
    void destroy_handlers() { shutdown(); }
};

} // namespace ferry::server::detail
