// Asio conventions shared by pool/ and server/ (design §2): one io_context, coroutines everywhere.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace ferry {
namespace asio = boost::asio;
using error_code = boost::system::error_code;
template <typename T = void> using awaitable = asio::awaitable<T>;
// Throwing token: any error aborts the coroutine.
inline constexpr auto use_awaitable = asio::use_awaitable;
// Non-throwing token: for expected outcomes (EOF, timeout, worker death); yields std::tuple<error_code, ...>.
inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// Completion handler for co_spawn that logs whatever escaped the coroutine.
struct log_exceptions {
    const char* what;
    void operator()(std::exception_ptr e) const;
};
} // namespace ferry
