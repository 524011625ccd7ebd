// The HTTP/1.1 front end: listener, sessions, graceful shutdown. main.cpp calls run().
#pragma once

#include "ferry/conf/config.hpp"

namespace ferry::server {

// Binds http.address, starts the worker pool and serves until SIGTERM/SIGINT.
// Prints "listening on http://HOST:PORT" on stdout once bound. Returns the process exit code.
int run(const conf::Config &config);

} // namespace ferry::server
