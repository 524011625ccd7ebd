#include "transport.hpp"

#include <array>
#include <sys/socket.h>

namespace ferry::server::detail {

Transport::Transport(Connections &conns, tcp::socket socket, conf::Duration write_timeout)
    : conns_(conns), socket_(std::move(socket)), write_timeout_(write_timeout)
{
    conn_.socket = &socket_;
    registered_ = conns_.list.insert(conns_.list.end(), &conn_);
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec); // write_all_fast() writes to it directly
    if (auto ep = socket_.remote_endpoint(ec); !ec)
        remote_ = ep.address().to_string();
}

Transport::~Transport()
{
    conns_.wheel.remove(conn_);
    conns_.list.erase(registered_);
    error_code ec;
    socket_.close(ec);
}

awaitable<bool> Transport::write(std::span<const asio::const_buffer> bufs)
{
    error_code ec = co_await write_all_fast(socket_, bufs, [this] { arm(write_timeout_); });
    disarm();
    co_return !ec;
}

awaitable<bool> Transport::flush(std::string &out)
{
    if (out.empty())
        co_return true;
    std::array<asio::const_buffer, 1> b{asio::buffer(out)};
    bool ok = co_await write(b);
    out.clear();
    if (out.capacity() > 1024 * 1024)
        std::string().swap(out);
    co_return ok;
}

bool Transport::client_gone()
{
    // A reset leaves ECONNRESET (or another error) pending on the socket; a FIN (half-close) does not.
    int err = 0;
    socklen_t len = sizeof err;
    return ::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0;
}

awaitable<void> Transport::shut_down(bool linger, std::span<char> scratch)
{
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    if (!linger || ec)
        co_return;
    arm(std::chrono::seconds(2));
    std::size_t drained = 0;
    while (drained < 4 * 1024 * 1024) {
        auto [rec, n] = co_await read_some(scratch);
        if (rec)
            break;
        drained += n;
    }
    disarm();
}

} // namespace ferry::server::detail
