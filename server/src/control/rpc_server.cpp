#include "rpc_server.hpp"

#include "conn_slots.hpp"
#include "ferry/base/log.hpp"
#include "rpc_frame.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace ferry::server::detail {

namespace json = boost::json;
using tcp = asio::ip::tcp;
using unix_socket = asio::local::stream_protocol;

namespace {

Result<std::string> ok(std::string s)
{
    return Result<std::string>(boost::system::in_place_value, std::move(s));
}

constexpr auto frame_timeout = std::chrono::seconds(10); // a frame that began goes on within this
constexpr unsigned max_connections = 64;
constexpr const char *too_large_hint =
    " (the limit follows websockets.max_message_size: twice it and 64 KiB, at least 1 MiB)";
constexpr const char *methods_known =
    "resetter.List, resetter.Reset, informer.List, informer.Workers, ferry.Stop";

// RoadRunner's worker states (roadrunner-server/pool fsm): the numbers informer.Workers reports.
int rr_state(const std::string &s)
{
    if (s == "ready")
        return 1;
    if (s == "working")
        return 2;
    if (s == "stopping")
        return 4;
    if (s == "stopped")
        return 5;
    return 0; // spawning: inactive
}

// CPU use since start (%) of a process, from /proc; 0 when it is gone. (Its RSS comes with the snapshot.)
double cpu_percent(int pid)
{
    double out = 0;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line))
        return out;
    auto close = line.rfind(')');
    if (close == std::string::npos)
        return out;
    std::istringstream rest(line.substr(close + 2));
    std::string field;
    std::vector<std::string> f;
    while (rest >> field)
        f.push_back(field);
    if (f.size() < 20)
        return out;
    const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double cpu = (std::stod(f[11]) + std::stod(f[12])) / hz; // utime + stime
    const double started = std::stod(f[19]) / hz;                  // since boot
    std::ifstream uptime("/proc/uptime");
    double up = 0;
    if (uptime >> up && up > started)
        out = std::round(cpu / (up - started) * 10000.0) / 100.0;
    return out;
}

// The plugin name of resetter.Reset / informer.Workers: a JSON string ("http"); empty or null = http.
Result<std::string> plugin_arg(std::string_view arg)
{
    if (arg.empty())
        return ok("http");
    error_code ec;
    auto v = json::parse(json::string_view(arg.data(), arg.size()), ec);
    if (ec)
        return fail("the argument is not JSON: " + ec.message());
    if (v.is_null())
        return ok("http");
    if (!v.is_string())
        return fail("the argument must be a plugin name (a JSON string, e.g. \"http\")");
    return ok(std::string(v.as_string()));
}

} // namespace

std::size_t rpc_payload_limit(const conf::Config &cfg)
{
    // websockets.Publish / Send carry a message as JSON text (PHP's json_encode escapes non-ASCII as \uXXXX
    // unless told not to) or base64: twice the message and room for the rest of the call.
    std::size_t limit = 1 << 20;
    if (cfg.websockets.enabled)
        limit = std::max<std::size_t>(limit, 2 * cfg.websockets.max_message_size + 64 * 1024);
    return std::min<std::size_t>(limit, 0xFFFFFFFFu); // a Goridge length is 32 bits
}

awaitable<Result<std::string>> rpc_call(RpcTarget &target, std::string_view method, std::string_view arg)
{
    if (method == "resetter.List" || method == "informer.List") {
        json::array names;
        if (target.pools)
            for (const auto &e : target.pools->all())
                names.emplace_back(e.name);
        co_return ok(json::serialize(names));
    }
    if (method == "resetter.Reset" || method == "informer.Workers") {
        auto plugin = plugin_arg(arg);
        if (!plugin)
            co_return plugin.error();
        if (!target.pools)
            co_return fail("the workers are not started yet");
        pool::Pool *pool = target.pools->find(*plugin);
        if (!pool)
            co_return fail("no plugin \"" + relay::printable(*plugin, 64) +
                           "\" (Ferry has: " + target.pools->names() + ")");
        if (method == "resetter.Reset") {
            auto done = co_await target.reset("RPC resetter.Reset", *plugin);
            if (!done)
                co_return done.error();
            co_return ok("true");
        }
        auto workers = co_await pool->snapshot(true);
        json::array list;
        const auto now = std::chrono::system_clock::now();
        for (const auto &w : workers) {
            json::object o;
            o["pid"] = w.pid;
            o["status"] = rr_state(w.state);
            o["numExecs"] = w.jobs;
            o["created"] =
                std::chrono::duration_cast<std::chrono::nanoseconds>(w.created.time_since_epoch()).count();
            o["memoryUsage"] = w.rss;
            o["CPUPercent"] = cpu_percent(w.pid);
            o["command"] = target.command;
            o["statusStr"] = w.state;
            // Ferry's own
            o["loop"] = w.loop;
            o["replacing"] = w.replacing;
            o["pinnedCpu"] = w.cpu; // -1: not pinned (http.pool.cpu_affinity)
            o["ageSeconds"] = std::chrono::duration_cast<std::chrono::seconds>(now - w.created).count();
            list.push_back(std::move(o));
        }
        json::object out;
        out["workers"] = std::move(list);
        co_return ok(json::serialize(out));
    }
    if (method == "ferry.Stop") {
        if (target.stop)
            target.stop();
        co_return ok("true");
    }
    if (target.extension)
        if (auto r = target.extension(method, arg))
            co_return std::move(*r);
    co_return fail("unknown method \"" + relay::printable(method, 80) + "\" (known: " + methods_known +
                   (target.extension ? ", websockets.Publish, websockets.Send, websockets.Close" : "") + ")");
}

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
    bool stopped = false;

    // ---- one connection -----------------------------------------------------------------------

    template <typename Socket> struct Watch {
        std::shared_ptr<Socket> sock;
        std::uint64_t gen = 0;
        bool fired = false;
    };

    template <typename Socket>
    static awaitable<void> session(std::shared_ptr<Impl> self, std::shared_ptr<Socket> sock, std::string peer,
                                   std::shared_ptr<ConnSlots::Lease> lease)
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
            std::weak_ptr<Socket> weak = sock;
            std::shared_ptr<ConnSlots::Lease> lease = self->slots.admit(peer, [weak] {
                if (auto s = weak.lock()) {
                    error_code ignored;
                    s->close(ignored);
                }
            });
            if (!lease)
                continue; // counted and logged; `sock` closes
            asio::co_spawn(self->io, session<Socket>(self, sock, peer, std::move(lease)),
                           log_exceptions{"rpc session"});
        }
    }

    // ---- binding --------------------------------------------------------------------------------

    Result<void> bind_tcp(const std::string &hostport)
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
        tcp::endpoint ep(addr, static_cast<unsigned short>(std::stoul(port)));
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
    log::info("rpc", "listening on " + i.address);
}

void RpcServer::stop()
{
    if (!impl_ || impl_->stopped)
        return;
    impl_->stopped = true;
    error_code ignored;
    impl_->tcp_acceptor.close(ignored);
    impl_->unix_acceptor.close(ignored);
    impl_->slots.close_all();
    if (!impl_->unix_path.empty())
        ::unlink(impl_->unix_path.c_str());
}

const std::string &RpcServer::address() const
{
    return impl_->address;
}

} // namespace ferry::server::detail
