// What the pool's tests share (pool_test, reply_test, loops_test): the process's host, options for a PHP
// fixture, a request context, running a coroutine on an io_context bounded in time.
#pragma once

#include "ferry/pool/pool.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <exception>
#include <memory>
#include <string>

namespace pool_test {

using namespace ferry;
using namespace std::chrono_literals;

// SIGPIPE is main()'s to decide (ferry ignores it); these tests write to dead workers, so they do too.
[[maybe_unused]] inline const auto sigpipe = std::signal(SIGPIPE, SIG_IGN);

inline std::string fixture(const std::string &name)
{
    return std::string(FERRY_SOURCE_DIR) + "/tests/php/" + name;
}

// The test process's host, as main builds one for the server: every pool of the process shares it.
inline std::shared_ptr<pool::Host> host()
{
    static const auto h = std::make_shared<pool::Host>();
    return h;
}

inline pool::Options options(const std::string &script, unsigned workers = 1)
{
    pool::Options o;
    o.command = {"php", fixture(script)};
    o.num_workers = workers;
    o.allocate_timeout = 5s;
    o.destroy_timeout = 3s;
    o.boot_timeout = 5s;
    return o;
}

inline relay::RequestContext request(const std::string &path, const std::string &method = "GET")
{
    relay::RequestContext c;
    c.remote_addr = "127.0.0.1";
    c.protocol = "HTTP/1.1";
    c.method = method;
    c.uri = "http://test" + path;
    if (auto q = path.find('?'); q != std::string::npos)
        c.raw_query = path.substr(q + 1);
    c.headers = {{"Content-Type", {"text/plain"}}};
    return c;
}

// start()'s outcome for EXPECT_TRUE, with the error message when it failed.
inline ::testing::AssertionResult started(const Result<void> &r)
{
    if (r)
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << r.error().message;
}

// start()'s error message ("" when it succeeded).
inline std::string error_of(const Result<void> &r)
{
    return r ? std::string() : r.error().message;
}

// Runs `body` as a coroutine on a fresh io_context, bounded in time.
template <typename F> void run(asio::io_context &io, F body)
{
    bool done = false;
    std::exception_ptr error;
    asio::co_spawn(io, body(), [&](std::exception_ptr e) {
        done = true;
        error = e;
        io.stop();
    });
    io.run_for(60s);
    ASSERT_TRUE(done) << "coroutine did not finish in time";
    if (error)
        std::rethrow_exception(error);
}

} // namespace pool_test
