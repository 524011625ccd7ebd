// The RPC listener (rpc_server.hpp): tcp or unix accept, or connections handed over by the admin listener it
// rides; one session per connection (frames in, calls answered in order). The methods are rpc_methods.cpp's.
#include "rpc_server.hpp"

#include "conn_slots.hpp"
#include "ferry/base/log.hpp"
#include "rpc_frame.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace ferry::server::detail {

using tcp = asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;

namespace {

constexpr auto frame_timeout = std::chrono::seconds(10); // a frame that began goes on within this
constexpr unsigned max_connections = 64;
constexpr const char *too_large_hint =
    " (the limit follows websockets.max_message_size: twice it and 64 KiB, at least 1 MiB)";

} // namespace

struct RpcServer::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, const conf::RpcConfig &c, RpcTarget t, ControlCounters &counters,
         std::size_t max)
        : io(io_), cfg(c), target(std::move(t)), tcp_acceptor(io_), unix_acceptor(io_), max_payload(max),
          slots(counters, ControlListener::rpc, max_connections, "rpc")
    {
    }
    asio::io_context &io;
    conf::RpcConfig cfg;
    RpcTarget target;
    tcp::acceptor tcp_acceptor;
    unix_socket::acceptor unix_acceptor;
    std::string address, unix_path;
    std::size_t max_payload;
    ConnSlots slots;
    TaskGroup sessions; // its connections' sessions: a stop closes the group and their connections
    bool stopped = false;
    bool running = false;
    std::string rides; // the key of the admin listener it rides ("status.address"), "": its own listener

    // ---- one connection -----------------------------------------------------------------------

    template <typename Socket> struct Watch {
        std::shared_ptr<Socket> sock;
        std::uint64_t gen = 0;
        bool fired = false;
    };

    template <typename Socket>
    static awaitable<void> session(std::shared_ptr<Impl> self, std::shared_ptr<Socket> sock, std::string peer,
                                   std::shared_ptr<ConnSlots::Lease> lease,
                                   [[maybe_unused]] TaskGroup::Hold hold) // held until the session ends
    {
        std::string buf;
        std::size_t skip = 0; // bytes of an over-size frame still to read past
        asio::steady_timer watchdog(self->io);
        auto watch = std::make_shared<Watch<Socket>>();
        watch->sock = sock;
        for (;;) {
            RpcParse p;
            if (skip == 0)
                p = parse_rpc(buf, self->max_payload);
            if (p.status == relay::DecodeStatus::error && p.too_large) {
                // The caller learns why; the connection goes on after the frame.
                log::warn("rpc", peer + ": " + p.error + "; answered with that error");
                const std::string reply =
                    encode_rpc(relay::flag::codec_json | relay::flag::error, p.message.seq,
                               p.message.method.empty() ? "?" : p.message.method, p.error + too_large_hint);
                auto [wec, wn] = co_await asio::async_write(*sock, asio::buffer(reply), nothrow);
                if (wec)
                    co_return;
                const std::size_t here = std::min(buf.size(), p.needed);
                skip = p.needed - here;
                buf.erase(0, here);
                continue;
            }
            if (p.status == relay::DecodeStatus::error) {
                log::warn("rpc", peer + ": not an RPC frame (" + p.error + "); closing the connection");
                co_return;
            }
            if (p.status == relay::DecodeStatus::ok) {
                lease->busy(true); // answering: not a connection to close for a new caller
                buf.erase(0, p.needed);
                RpcMessage &m = p.message;
                std::string reply;
                const std::uint8_t codec = m.flags & ~(relay::flag::control | relay::flag::error);
                if (!(codec & relay::flag::codec_json)) {
                    reply = encode_rpc(relay::flag::codec_json | relay::flag::error, m.seq, m.method,
                                       "Ferry's RPC speaks JSON (flags 0x08); this call has flags " +
                                           std::to_string(m.flags));
                } else {
                    log::debug("rpc", peer + ": " + relay::printable(m.method, 80));
                    auto r = co_await rpc_call(self->target, m.method, m.body);
                    reply = r ? encode_rpc(relay::flag::codec_json, m.seq, m.method, *r)
                              : encode_rpc(relay::flag::codec_json | relay::flag::error, m.seq, m.method,
                                           r.error().message);
                    if (!r)
                        log::info("rpc",
                                  peer + ": " + relay::printable(m.method, 80) + ": " + r.error().message);
                }
                auto [wec, wn] = co_await asio::async_write(*sock, asio::buffer(reply), nothrow);
                if (wec)
                    co_return;
                continue;
            }
            // Waiting for bytes, between calls or in a frame: the slot may be taken for a new caller (a
            // client trickling a frame must not hold it; one that sends its call at once is rarely the
            // oldest).
            const bool in_frame = !buf.empty() || skip > 0;
            if (in_frame)
                lease->slot().busy = false; // idle since the frame began
            else
                lease->busy(false); // idle since now
            if (!in_frame && buf.capacity() > 64 * 1024)
                buf = std::string(); // a large call's buffer is not kept while idle
            const bool silent = !lease->slot().spoke;
            if (in_frame || silent) { // a frame must go on within frame_timeout; a first byte come in time
                const std::uint64_t g = ++watch->gen;
                watchdog.expires_after(in_frame ? std::chrono::milliseconds(frame_timeout)
                                                : self->cfg.first_byte_timeout);
                watchdog.async_wait([watch, g](error_code ec) {
                    if (!ec && watch->gen == g) {
                        watch->fired = true;
                        error_code ignored;
                        watch->sock->close(ignored);
                    }
                });
            }
            // Read into the buffer itself: up to what the frame still needs (a large call in few reads), at
            // most 1 MiB more at a time (a frame's length alone allocates nothing).
            const std::size_t old = buf.size();
            const std::size_t wanted = skip > 0 ? skip : (p.needed > old ? p.needed - old : 0);
            const std::size_t room = std::clamp<std::size_t>(wanted, 4096, 1 << 20);
            buf.resize(old + room);
            auto [ec, n] = co_await sock->async_read_some(asio::buffer(buf.data() + old, room), nothrow);
            buf.resize(old + (ec ? 0 : n));
            ++watch->gen; // whatever the timer does now is stale
            watchdog.cancel();
            if (ec) {
                if (watch->fired && silent && !in_frame)
                    self->slots.first_byte_timeout(peer);
                else if (watch->fired)
                    log::warn("rpc", peer + ": half a frame for " + std::to_string(frame_timeout.count()) +
                                         " s; closing the connection");
                else if (in_frame)
                    log::warn("rpc", peer + ": closed in the middle of a frame");
                co_return;
            }
            lease->spoke();
            if (skip > 0) {
                const std::size_t past = std::min(n, skip);
                skip -= past;
                buf.erase(old, past);
            }
        }
    }

    template <typename Acceptor, typename Socket>
    static awaitable<void> accept_loop(std::shared_ptr<Impl> self, Acceptor &acceptor)
    {
        for (;;) {
            auto sock = std::make_shared<Socket>(self->io);
            auto [ec] = co_await acceptor.async_accept(*sock, nothrow);
            if (self->stopped || ec == asio::error::operation_aborted)
                co_return;
            if (ec)
                continue; // EMFILE and the like: the next one may work
            std::string peer = "rpc client";
            if constexpr (std::is_same_v<Socket, tcp::socket>) {
                error_code pe;
                auto ep = sock->remote_endpoint(pe);
                if (!pe)
                    peer = ep.address().to_string() + ":" + std::to_string(ep.port());
            }
            take(self, std::move(sock), std::move(peer));
        }
    }

    // A connection accepted here, or handed over by the admin listener RPC rides (adopt): a slot, a session.
    template <typename Socket>
    static void take(std::shared_ptr<Impl> self, std::shared_ptr<Socket> sock, std::string peer)
    {
        auto hold = self->sessions.enter();
        if (!hold)
            return; // stopped: `sock` closes (and takes no slot from an idle caller)
        std::weak_ptr<Socket> weak = sock;
        std::shared_ptr<ConnSlots::Lease> lease = self->slots.admit(peer, [weak] {
            if (auto s = weak.lock()) {
                error_code ignored;
                s->close(ignored);
            }
        });
        if (!lease)
            return; // counted and logged; `sock` closes
        asio::co_spawn(
            self->io,
            session<Socket>(self, std::move(sock), std::move(peer), std::move(lease), std::move(hold)),
            log_exceptions{"rpc session"});
    }

    // ---- binding --------------------------------------------------------------------------------

    // rpc.listen's tcp://host:port as an endpoint, refused when it is not loopback without allow_remote.
    Result<tcp::endpoint> tcp_endpoint(const std::string &hostport)
    {
        auto colon = hostport.rfind(':');
        std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
            host = host.substr(1, host.size() - 2);
        if (host.empty())
            host = "0.0.0.0";
        error_code ec;
        auto addr = asio::ip::make_address(host, ec);
        if (ec)
            return fail("rpc.listen: \"" + cfg.listen + "\": \"" + host + "\" is not an IP address");
        if (!addr.is_loopback()) {
            if (!cfg.allow_remote)
                return fail("rpc.listen: \"" + cfg.listen +
                            "\" is not a loopback address, and whoever reaches the RPC listener controls the "
                            "workers; set rpc.allow_remote: true to listen there anyway");
            log::warn("rpc", "listening on " + cfg.listen +
                                 " (rpc.allow_remote): anyone who reaches it can reset and stop this server");
        }
        return tcp::endpoint(addr, static_cast<unsigned short>(std::stoul(port)));
    }

    Result<void> bind_tcp(const std::string &hostport)
    {
        auto where = tcp_endpoint(hostport);
        if (!where)
            return where.error();
        if (!rides.empty()) { // the admin listener there hands its RPC connections over (adopt)
            address = cfg.listen;
            return {};
        }
        const tcp::endpoint ep = *where;
        error_code ec;
        tcp_acceptor.open(ep.protocol(), ec);
        if (!ec)
            tcp_acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
        if (!ec)
            tcp_acceptor.bind(ep, ec);
        if (!ec)
            tcp_acceptor.listen(asio::socket_base::max_listen_connections, ec);
        if (ec)
            return fail("rpc.listen: cannot listen on \"" + cfg.listen + "\": " + ec.message());
        auto bound = tcp_acceptor.local_endpoint();
        std::string shown =
            bound.address().is_v6() ? "[" + bound.address().to_string() + "]" : bound.address().to_string();
        address = "tcp://" + shown + ":" + std::to_string(bound.port());
        return {};
    }

    Result<void> bind_unix(const std::string &path)
    {
        struct stat st;
        if (::lstat(path.c_str(), &st) == 0) {
            if (!S_ISSOCK(st.st_mode))
                return fail("rpc.listen: \"" + path + "\" exists and is not a socket; not replacing it");
            // A socket file: another server's, or one left by a server that died.
            unix_socket::socket probe(io);
            error_code ec;
            probe.connect(unix_socket::endpoint(path), ec);
            if (!ec)
                return fail("rpc.listen: \"" + cfg.listen + "\" is in use by another running server");
            ::unlink(path.c_str());
        }
        error_code ec;
        const mode_t old = ::umask(0177); // created 0600: no window where others may connect
        unix_acceptor.open(unix_socket(), ec);
        if (!ec)
            unix_acceptor.bind(unix_socket::endpoint(path), ec);
        ::umask(old);
        if (!ec)
            ::chmod(path.c_str(), 0600);
        if (!ec)
            unix_acceptor.listen(asio::socket_base::max_listen_connections, ec);
        if (ec)
            return fail("rpc.listen: cannot listen on \"" + cfg.listen + "\": " + ec.message());
        unix_path = path;
        address = cfg.listen;
        return {};
    }
};

RpcServer::RpcServer(asio::io_context &io, const conf::RpcConfig &config, RpcTarget target,
                     ControlCounters &counters, std::size_t max_payload)
    : impl_(std::make_shared<Impl>(io, config, std::move(target), counters, max_payload))
{
}

RpcServer::~RpcServer()
{
    stop();
}

Result<void> RpcServer::bind()
{
    const std::string &l = impl_->cfg.listen;
    if (l.rfind("unix://", 0) == 0)
        return impl_->bind_unix(l.substr(7));
    return impl_->bind_tcp(l.substr(6));
}

void RpcServer::set_pools(const Pools *pools)
{
    impl_->target.pools = pools;
}

void RpcServer::run()
{
    auto &i = *impl_;
    if (i.tcp_acceptor.is_open())
        asio::co_spawn(i.io, Impl::accept_loop<tcp::acceptor, tcp::socket>(impl_, i.tcp_acceptor),
                       log_exceptions{"rpc accept"});
    if (i.unix_acceptor.is_open())
        asio::co_spawn(i.io,
                       Impl::accept_loop<unix_socket::acceptor, unix_socket::socket>(impl_, i.unix_acceptor),
                       log_exceptions{"rpc accept"});
    i.running = true;
    log::info("rpc", "listening on " + i.address + (i.rides.empty() ? "" : " (through " + i.rides + ")"));
}

void RpcServer::ride(std::string key)
{
    impl_->rides = std::move(key);
}

void RpcServer::adopt(StreamSocket sock, std::string peer)
{
    auto &i = *impl_;
    if (i.stopped || !i.running)
        return; // it closes
    error_code ec;
    auto ep = sock.local_endpoint(ec);
    auto fd = ec ? -1 : sock.release(ec);
    if (ec || fd < 0)
        return;
    auto s = std::make_shared<tcp::socket>(i.io);
    s->assign(ep.protocol(), fd, ec);
    if (ec) {
        ::close(fd);
        return;
    }
    Impl::take(impl_, std::move(s), std::move(peer));
}

void RpcServer::stop()
{
    if (!impl_ || impl_->stopped)
        return;
    impl_->stopped = true;
    error_code ignored;
    impl_->tcp_acceptor.close(ignored);
    impl_->unix_acceptor.close(ignored);
    impl_->sessions.close();
    impl_->slots.close_all();
    if (!impl_->unix_path.empty())
        ::unlink(impl_->unix_path.c_str());
}

awaitable<bool> RpcServer::join(std::chrono::steady_clock::time_point deadline)
{
    return impl_->sessions.join(deadline);
}

const std::string &RpcServer::address() const
{
    return impl_->address;
}

} // namespace ferry::server::detail
