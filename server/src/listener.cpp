#include "listener.hpp"

#include <boost/asio/socket_base.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <sys/socket.h>

namespace ferry::server::detail {

using boost::asio::ip::tcp;

Result<tcp::endpoint> listen_endpoint(boost::asio::io_context &io, const conf::Address &addr)
{
    boost::system::error_code ec;
    tcp::resolver resolver(io);
    auto results = resolver.resolve(addr.host, std::to_string(addr.port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec)
        return fail(ec.message());
    if (results.empty())
        return fail("the host resolves to no address");
    return results.begin()->endpoint();
}

Result<void> open_listener(tcp::acceptor &a, const tcp::endpoint &ep, bool reuseport, bool listen,
                           bool non_blocking)
{
    boost::system::error_code ec;
    a.open(ep.protocol(), ec);
    if (!ec)
        a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (ec)
        return fail(ec.message());
    if (reuseport) {
        int one = 1;
        if (::setsockopt(a.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
            return fail(std::string("SO_REUSEPORT: ") + std::strerror(errno));
    }
    a.bind(ep, ec);
    if (!ec && listen)
        a.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (!ec && non_blocking)
        a.non_blocking(true, ec);
    if (ec)
        return fail(ec.message());
    return {};
}

} // namespace ferry::server::detail
