#include "control/probe_server.hpp"

#include "control/conn_slots.hpp"
#include "ferry/base/log.hpp"
#include "http/response.hpp"
#include "listener.hpp"
#include "transport/stream.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <sys/socket.h>

namespace ferry::server::detail {

struct ProbeServer::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, conf::Address a, std::string k, std::string c, ControlListener which,
         std::chrono::milliseconds first_byte, ControlCounters &counters)
        : io(io_), addr(std::move(a)), key(std::move(k)), component(std::move(c)), acceptor(io_),
          first_byte_timeout(first_byte), slots(counters, which, max_connections, component)
    {
    }
    static constexpr unsigned max_connections = 64;                  // probes and scrapers do not need more
    static constexpr auto request_timeout = std::chrono::seconds(5); // from the first byte
    asio::io_context &io;
    conf::Address addr;
    std::string key, component;
    tcp::acceptor acceptor;
    struct Route {
        std::vector<std::string> paths;
        Answer answer;
    };
    std::vector<Route> routes;
    Claim theirs; // hand_over
    Take take;
    bool running = false, stopped = false;
    std::chrono::milliseconds first_byte_timeout;
    ConnSlots slots;

    std::string peer_of(const StreamSocket &sock) const
    {
        error_code ec;
        auto ep = sock.remote_endpoint(ec);
        return ec ? component + " client" : ep.address().to_string() + ":" + std::to_string(ep.port());
    }

    // Writes all of `out` to the client's stream; false if it is gone (or closed by the deadline).
    static awaitable<bool> write_all(Stream &stream, const std::string &out)
    {
        std::size_t done = 0;
        while (done < out.size()) {
            iovec v{const_cast<char *>(out.data() + done), out.size() - done};
            const Io r = stream.write(std::span<const iovec>(&v, 1));
            if (r.status == Io::done) {
                done += r.n;
                continue;
            }
            if (!r.blocked())
                co_return false;
            auto [ec] = co_await stream.async_wait(r.status, nothrow);
            if (ec)
                co_return false;
        }
        co_return true;
    }

    // One request through the client's Stream (transport/stream.hpp: the same byte path as every client's).
    static awaitable<void> serve(std::shared_ptr<Impl> self, std::shared_ptr<Stream> sockp, std::string peer,
                                 std::shared_ptr<ConnSlots::Lease> lease)
    {
        Stream &sock = *sockp;
        // A first byte within first_byte_timeout, then the whole request within request_timeout.
        auto fired = std::make_shared<bool>(false);
        asio::steady_timer deadline(self->io);
        deadline.expires_after(self->first_byte_timeout);
        auto arm = [&deadline, sockp, fired] {
            deadline.async_wait([sockp, fired](const error_code &ec) {
                if (!ec) {
                    *fired = true;
                    sockp->close();
                }
            });
        };
        arm();
        if (self->theirs) { // another protocol on this port: its first byte says which, read by nobody yet
            auto [ec] = co_await sock.async_wait(Io::wait_read, nothrow);
            unsigned char first = 0;
            if (ec || ::recv(sock.native_handle(), &first, 1, MSG_PEEK) != 1) {
                if (*fired)
                    self->slots.first_byte_timeout(peer);
                deadline.cancel();
                co_return;
            }
            if (self->theirs(first)) {
                deadline.cancel();
                self->take(sock.take_socket(), std::move(peer)); // its slot is released here
                co_return;
            }
        }
        Limits limits;
        limits.max_header_size = 8 * 1024;
        limits.max_body_size = 0;
        HttpParser parser(limits);
        std::string out;
        for (;;) {
            auto ev = parser.next();
            if (ev == HttpParser::Event::need_more) {
                std::span<char> room = parser.prepare();
                auto [ec, n] = co_await sock.async_read_some(room);
                if (ec) {
                    if (*fired && !lease->slot().spoke)
                        self->slots.first_byte_timeout(peer);
                    break;
                }
                if (!lease->slot().spoke) {
                    lease->spoke();
                    if (deadline.expires_after(request_timeout) > 0) // the old wait ends, aborted
                        arm();
                }
                parser.commit(n);
                continue;
            }
            if (ev == HttpParser::Event::head)
                continue;
            lease->busy(true);
            if (ev == HttpParser::Event::error)
                append_error(out, parser.error_status(), parser.error_message(), false, false);
            else
                co_await self->dispatch(out, parser.request());
            if (co_await write_all(sock, out))
                sock.shutdown_send();
            break;
        }
        deadline.cancel();
        co_return;
    }

    // The route of the request's path; one route answers every path itself (its own 404).
    awaitable<void> dispatch(std::string &out, const Request &req)
    {
        const std::string_view target = req.target;
        const std::string_view path = target.substr(0, target.find('?'));
        const Route *found = routes.size() == 1 ? &routes.front() : nullptr;
        for (const Route &r : routes)
            for (const std::string &p : r.paths)
                if (p == path)
                    found = &r;
        if (!found) {
            std::string known;
            for (const Route &r : routes)
                for (const std::string &p : r.paths)
                    known += (known.empty() ? "" : ", ") + p;
            append_error(out, 404, "this listener answers " + known, false, req.method == "HEAD");
            co_return;
        }
        co_await found->answer(out, req);
    }

    static awaitable<void> accept(std::shared_ptr<Impl> self)
    {
        while (!self->stopped) {
            auto [ec, sock] = co_await self->acceptor.async_accept(self->io, nothrow);
            if (ec) {
                if (self->stopped || ec == asio::error::operation_aborted)
                    co_return;
                log::error(self->component, "accept failed: " + ec.message());
                asio::steady_timer t(self->io, std::chrono::milliseconds(100));
                co_await t.async_wait(nothrow);
                continue;
            }
            std::string peer = self->peer_of(sock);
            auto sockp = std::make_shared<Stream>(std::move(sock));
            std::weak_ptr<Stream> weak = sockp;
            std::shared_ptr<ConnSlots::Lease> lease = self->slots.admit(peer, [weak] {
                if (auto s = weak.lock())
                    s->close();
            });
            if (!lease)
                continue; // every slot busy answering: counted and logged; `sockp` closes
            asio::co_spawn(self->io, serve(self, std::move(sockp), std::move(peer), std::move(lease)),
                           log_exceptions{self->component.c_str()});
        }
        co_return;
    }
};

ProbeServer::ProbeServer(asio::io_context &io, conf::Address address, std::string key, std::string component,
                         ControlListener which, std::chrono::milliseconds first_byte_timeout,
                         ControlCounters &counters)
    : impl_(std::make_shared<Impl>(io, std::move(address), std::move(key), std::move(component), which,
                                   first_byte_timeout, counters))
{
}

ProbeServer::~ProbeServer()
{
    stop();
}

Result<void> ProbeServer::bind()
{
    Impl &s = *impl_;
    if (s.acceptor.is_open())
        return {};
    auto ep = listen_endpoint(s.io, s.addr);
    Result<void> opened = ep ? open_listener(s.acceptor, *ep) : Result<void>(ep.error());
    if (!opened)
        return fail(s.key + ": cannot listen on " + s.addr.to_string() + ": " + opened.error().message);
    return {};
}

void ProbeServer::route(std::vector<std::string> paths, Answer answer)
{
    impl_->routes.push_back(Impl::Route{std::move(paths), std::move(answer)});
}

void ProbeServer::hand_over(Claim theirs, Take take)
{
    impl_->theirs = std::move(theirs);
    impl_->take = std::move(take);
}

void ProbeServer::run()
{
    if (std::exchange(impl_->running, true))
        return;
    asio::co_spawn(impl_->io, Impl::accept(impl_), log_exceptions{impl_->component.c_str()});
}

void ProbeServer::stop()
{
    impl_->stopped = true;
    error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->slots.close_all();
}

std::string rpc_rides(const conf::Config &cfg)
{
    const auto on = [&cfg](bool enabled, const conf::Address &a) {
        return enabled && a.port != 0 && cfg.rpc.listen == "tcp://" + a.to_string();
    };
    if (on(cfg.status.enabled, cfg.status.address))
        return "status.address";
    if (on(cfg.metrics.enabled, cfg.metrics.address))
        return "metrics.address";
    return "";
}

std::shared_ptr<ProbeServer> shared_probe_listener(asio::io_context &io, const conf::Config &cfg,
                                                   ControlCounters &counters)
{
    const auto &s = cfg.status;
    const auto &m = cfg.metrics;
    if (!s.enabled || !m.enabled || !(s.address == m.address) || s.address.port == 0)
        return nullptr;
    const auto first_byte = std::max(s.first_byte_timeout, m.first_byte_timeout);
    if (s.first_byte_timeout != m.first_byte_timeout)
        log::warn("status", "status.first_byte_timeout (" + std::to_string(s.first_byte_timeout.count()) +
                                " ms) and metrics.first_byte_timeout (" +
                                std::to_string(m.first_byte_timeout.count()) +
                                " ms) differ, but status.address = metrics.address is one listener: " +
                                std::to_string(first_byte.count()) + " ms applies to both");
    return std::make_shared<ProbeServer>(io, s.address, "status.address (= metrics.address)", "status",
                                         ControlListener::status, first_byte, counters);
}

std::string ProbeServer::address() const
{
    error_code ec;
    auto ep = impl_->acceptor.local_endpoint(ec);
    if (ec)
        return impl_->addr.to_string();
    std::string host = ep.address().to_string();
    return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

} // namespace ferry::server::detail
