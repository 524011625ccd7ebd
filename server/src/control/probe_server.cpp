// The admin listener (probe_server.hpp): accept, the slots, the RPC hand-over by first byte, the routes as
// the handler of its HTTP sessions; rpc_rides and the listener status and metrics share.
#include "control/probe_server.hpp"

#include "control/conn_slots.hpp"
#include "ferry/base/log.hpp"
#include "handlers/handler.hpp"
#include "http/response.hpp"
#include "listener.hpp"
#include "shared_state.hpp"
#include "transport/stream.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <sys/socket.h>

namespace ferry::server::detail {

struct ProbeServer::Impl : std::enable_shared_from_this<Impl> {
    Impl(SharedState &s, conf::Address a, std::string k, std::string c, ControlListener which,
         std::chrono::milliseconds first_byte, ControlCounters &counters)
        : st(s), io(s.io), addr(std::move(a)), key(std::move(k)), component(std::move(c)), acceptor(s.io),
          first_byte_timeout(first_byte), slots(counters, which, max_connections, component), handler(*this)
    {
        limits.max_header_size = 8 * 1024;
        limits.max_body_size = 0;
        router.add(handler);
        site = Site{&router, &limits, first_byte, first_byte, request_timeout, false, false};
    }
    static constexpr unsigned max_connections = 64;                  // probes and scrapers do not need more
    static constexpr auto request_timeout = std::chrono::seconds(5); // from the first byte
    SharedState &st; // loops[0]'s: the connections its sessions join (a stop closes them with the others)
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
    TaskGroup sessions; // its connections' sessions: a stop closes the group and their connections

    std::string peer_of(const StreamSocket &sock) const
    {
        error_code ec;
        auto ep = sock.remote_endpoint(ec);
        return ec ? component + " client" : ep.address().to_string() + ":" + std::to_string(ep.port());
    }

    // The listener's one handler: every request goes to its route (handlers/handler.hpp, the seam every
    // listener's sessions use), one request per connection.
    struct Routes : Handler {
        explicit Routes(Impl &i) : impl(i) {}
        Impl &impl;
        std::string_view name() const override { return "admin"; }
        bool accepts(const Request &) const override { return true; }
        struct Conn : Handler::Connection {
            explicit Conn(Impl &i) : impl(i) {}
            Impl &impl;
            awaitable<After> handle(Exchange &ex) override
            {
                co_await impl.dispatch(ex.out, ex.request);
                co_return After::close;
            }
        };
        std::unique_ptr<Handler::Connection> connect() override { return std::make_unique<Conn>(impl); }
    };

    Routes handler;
    Router router;
    Limits limits;
    Site site;

    // One connection: RPC's when it rides this listener and the first byte says so (read by nobody yet),
    // else the HTTP session every listener runs (http/session.cpp), among this loop's connections. In the
    // listener's own task group, not the loop's sessions a drain waits for: it answers on through the drain,
    // and its stop closes what it holds (ConnSlots::close_all) and is joined (ProbeServer::join).
    static awaitable<void> serve(std::shared_ptr<Impl> self, StreamSocket raw, std::string peer,
                                 std::shared_ptr<ConnSlots::Lease> lease)
    {
        SharedState &st = self->st;
        auto hold = self->sessions.enter();
        if (!hold)
            co_return; // stopped: it closes
        if (self->theirs) {
            auto stream = std::make_shared<Stream>(std::move(raw));
            auto fired = std::make_shared<bool>(false);
            asio::steady_timer deadline(self->io, self->first_byte_timeout);
            deadline.async_wait([stream, fired](const error_code &ec) {
                if (!ec) {
                    *fired = true;
                    stream->cancel();
                }
            });
            auto [ec] = co_await stream->async_wait(Io::wait_read, nothrow);
            unsigned char first = 0;
            const bool got = !ec && ::recv(stream->native_handle(), &first, 1, MSG_PEEK) == 1;
            deadline.cancel();
            if (!got) {
                if (*fired)
                    lease->first_byte_timeout(peer);
            } else if (self->theirs(first)) {
                self->take(stream->take_socket(), std::move(peer)); // its slot here is released below
            } else {
                co_await http_session(st, stream->take_socket(), self->site, lease.get());
            }
        } else {
            co_await http_session(st, std::move(raw), self->site, lease.get());
        }
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
            // Closing it to make room (or at the stop) ends its session's wait: the session owns the socket.
            const int fd = sock.native_handle();
            std::shared_ptr<ConnSlots::Lease> lease =
                self->slots.admit(peer, [fd] { ::shutdown(fd, SHUT_RDWR); });
            if (!lease)
                continue; // every slot busy answering: counted and logged; `sock` closes
            asio::co_spawn(self->io, serve(self, std::move(sock), std::move(peer), std::move(lease)),
                           log_exceptions{self->component.c_str()});
        }
        co_return;
    }
};

ProbeServer::ProbeServer(SharedState &loop, conf::Address address, std::string key, std::string component,
                         ControlListener which, std::chrono::milliseconds first_byte_timeout,
                         ControlCounters &counters)
    : impl_(std::make_shared<Impl>(loop, std::move(address), std::move(key), std::move(component), which,
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

awaitable<bool> ProbeServer::join(std::chrono::steady_clock::time_point deadline)
{
    return impl_->sessions.join(deadline);
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
    impl_->sessions.close();
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

std::shared_ptr<ProbeServer> shared_probe_listener(SharedState &loop, const conf::Config &cfg,
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
    return std::make_shared<ProbeServer>(loop, s.address, "status.address (= metrics.address)", "status",
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
