#include "broker/redis_conn.hpp"

#include <boost/asio/connect.hpp>

namespace ferry::server::detail::broker {
namespace {

// A deadline over one wait: when it passes, `cancel` runs (closing or cancelling what is waited on). Its
// state is shared with the timer's handler, which may run after the waiting frame is gone.
struct Deadline {
    struct State {
        asio::steady_timer timer;
        bool passed = false;
        bool over = false; // the wait ended: a completion already queued must not cancel anything
        explicit State(asio::any_io_executor ex) : timer(ex) {}
    };
    std::shared_ptr<State> s;
    template <typename Cancel> Deadline(asio::any_io_executor ex, conf::Duration d, Cancel cancel)
    {
        if (d <= conf::Duration::zero())
            return;
        s = std::make_shared<State>(ex);
        s->timer.expires_after(d);
        s->timer.async_wait([st = s, cancel](const error_code &ec) {
            if (!ec && !st->over) {
                st->passed = true;
                cancel();
            }
        });
    }
    ~Deadline()
    {
        if (s) {
            s->over = true;
            s->timer.cancel();
        }
    }
    bool passed() const { return s && s->passed; }
};

std::string seconds(conf::Duration d)
{
    return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s"
                                 : std::to_string(d.count()) + " ms";
}

} // namespace

awaitable<Result<void>> RedisConn::connect(const conf::Address &a, conf::Duration timeout)
{
    auto ex = sock_.get_executor();
    asio::ip::tcp::resolver resolver(ex);
    Deadline deadline(ex, timeout, [&resolver, this] {
        resolver.cancel();
        error_code ignored;
        sock_.close(ignored);
    });
    auto [rec, endpoints] = co_await resolver.async_resolve(a.host, std::to_string(a.port), nothrow);
    if (rec)
        co_return fail(deadline.passed() ? "no address for " + a.host + " within " + seconds(timeout)
                                         : "cannot resolve " + a.host + ": " + rec.message());
    auto [cec, ep] = co_await asio::async_connect(sock_, endpoints, nothrow);
    if (cec)
        co_return fail(deadline.passed() ? "no connection within " + seconds(timeout) : cec.message());
    error_code ignored;
    sock_.set_option(asio::ip::tcp::no_delay(true), ignored);
    sock_.non_blocking(true, ignored); // kick() writes without waiting
    co_return Result<void>();
}

void RedisConn::send(std::initializer_list<std::string_view> args)
{
    append_command(out_, args);
    ++pending;
    kick();
}

void RedisConn::kick()
{
    if (writing || out_.empty() || !sock_.is_open())
        return;
    // At once when the socket takes it (the common case): no task, no trip through the loop's queue, which
    // a loop busy with its own connections makes long.
    error_code ec;
    const std::size_t n = sock_.write_some(asio::buffer(out_), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
        error = "cannot write: " + ec.message();
        close();
        return;
    }
    out_.erase(0, ec ? 0 : n);
    if (out_.empty())
        return;
    writing = true;
    asio::co_spawn(sock_.get_executor(), write_loop(shared_from_this()), asio::detached);
}

awaitable<void> RedisConn::write_loop(std::shared_ptr<RedisConn> /*self: kept alive while writing*/)
{
    while (!out_.empty() && sock_.is_open()) {
        writing_.clear();
        writing_.swap(out_);
        auto [ec, n] = co_await asio::async_write(sock_, asio::buffer(writing_), nothrow);
        if (ec) {
            error = "cannot write: " + ec.message();
            close();
            break;
        }
    }
    writing_.clear();
    writing = false;
}

awaitable<Result<Reply>> RedisConn::read(conf::Duration within)
{
    Reply r;
    for (;;) {
        switch (reader_.next(r)) {
        case ReplyReader::Got::reply:
            co_return r;
        case ReplyReader::Got::error:
            co_return fail("not Redis's protocol: " + reader_.error());
        case ReplyReader::Got::more:
            break;
        }
        if (!sock_.is_open())
            co_return fail(error.empty() ? "connection closed" : error);
        Deadline deadline(sock_.get_executor(), within, [this] {
            error_code ignored;
            sock_.cancel(ignored);
        });
        auto [ec, n] = co_await sock_.async_read_some(asio::buffer(buf_), nothrow);
        if (ec) {
            if (deadline.passed())
                co_return fail("no answer within " + seconds(within));
            co_return fail(ec == asio::error::eof ? std::string("the server closed the connection")
                           : !error.empty()       ? error
                                                  : ec.message());
        }
        last_read = clock::now();
        if (!reader_.feed(buf_.data(), n))
            co_return fail("not Redis's protocol: " + reader_.error());
    }
}

void RedisConn::close()
{
    error_code ignored;
    sock_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    sock_.close(ignored);
}

} // namespace ferry::server::detail::broker
