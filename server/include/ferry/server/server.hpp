// The HTTP/1.1 front end: listener, sessions, graceful shutdown. main.cpp calls run().
#pragma once

#include "ferry/conf/config.hpp"

#include <string>
#include <vector>

namespace ferry::server {

// Binds http.address, starts the worker pool and serves until SIGTERM/SIGINT.
// Prints "listening on http://HOST:PORT" on stdout once bound. Returns the process exit code.
int run(const conf::Config &config);

// `ferry workers [--json] [-i]`, `ferry reset [pool]`, `ferry stop`: an RPC call to the server that runs with
// this configuration (its rpc.listen). Returns the process exit code.
int control_command(const std::string &command, const std::vector<std::string> &args,
                    const conf::Config &config);

} // namespace ferry::server
