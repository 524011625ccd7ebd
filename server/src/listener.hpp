// Opening a listening TCP socket, for the HTTP front end (accept.cpp) and the status and metrics listeners
// (control/probe_server.cpp): resolve host:port (numeric port, passive), open, SO_REUSEADDR (and SO_REUSEPORT
// when asked), bind, listen. Errors are the system's own text ("Address already in use"), for a message that
// names the config key.
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace ferry::server::detail {

// The endpoint to bind for `addr` (its first address).
Result<boost::asio::ip::tcp::endpoint> listen_endpoint(boost::asio::io_context &io,
                                                       const conf::Address &addr);

// Opens, binds and (with `listen`) listens on `a`; `non_blocking` for accept4() until EAGAIN.
Result<void> open_listener(boost::asio::ip::tcp::acceptor &a, const boost::asio::ip::tcp::endpoint &ep,
                           bool reuseport = false, bool listen = true, bool non_blocking = false);

} // namespace ferry::server::detail
