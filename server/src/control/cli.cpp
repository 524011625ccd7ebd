// The control commands of the CLI (`ferry workers`, `ferry reset`, `ferry stop`): RPC calls to a running
// server, found through the same config file's rpc.listen (as `rr workers -c .rr.yaml`).
#include "ferry/server/server.hpp"

#include "rpc_frame.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <sys/socket.h>
#include <sys/time.h>
#include <thread>

namespace ferry::server {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using boost::system::error_code;

int fail_with(const std::string &msg)
{
    std::fprintf(stderr, "ferry: %s\n", msg.c_str());
    return 1;
}

// One call over a fresh connection; the reply's body, or the error message. `timeout_s` 0 = none (a reset).
struct Reply {
    bool ok = false;
    std::string body;
};

template <typename Socket>
Reply exchange(Socket &sock, const std::string &method, const std::string &arg, int timeout_s)
{
    if (timeout_s > 0) {
        timeval tv{timeout_s, 0};
        ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    std::string req = detail::encode_rpc(relay::flag::codec_json, 1, method, arg);
    error_code ec;
    asio::write(sock, asio::buffer(req), ec);
    if (ec)
        return {false, "sending the call failed: " + ec.message()};
    std::string buf;
    char chunk[4096];
    for (;;) {
        auto p = detail::parse_rpc(buf, 64u << 20);
        if (p.status == relay::DecodeStatus::error)
            return {false, "the server's answer is not an RPC frame: " + p.error};
        if (p.status == relay::DecodeStatus::ok) {
            if (p.message.flags & relay::flag::error)
                return {false, p.message.body};
            return {true, p.message.body};
        }
        std::size_t n = sock.read_some(asio::buffer(chunk), ec);
        if (ec)
            return {false, ec == asio::error::would_block || ec == asio::error::try_again
                               ? std::string("no answer within ") + std::to_string(timeout_s) + " s"
                               : "reading the answer failed: " + ec.message()};
        buf.append(chunk, n);
    }
}

Reply call(const std::string &listen, const std::string &method, const std::string &arg, int timeout_s)
{
    asio::io_context io;
    error_code ec;
    if (listen.rfind("unix://", 0) == 0) {
        asio::local::stream_protocol::socket sock(io);
        sock.connect(asio::local::stream_protocol::endpoint(listen.substr(7)), ec);
        if (ec)
            return {false, "cannot reach the server at " + listen + ": " + ec.message()};
        return exchange(sock, method, arg, timeout_s);
    }
    std::string hostport = listen.substr(6);
    auto colon = hostport.rfind(':');
    std::string host = hostport.substr(0, colon), port = hostport.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[')
        host = host.substr(1, host.size() - 2);
    if (host.empty() || host == "0.0.0.0")
        host = "127.0.0.1";
    asio::ip::tcp::resolver resolver(io);
    auto eps = resolver.resolve(host, port, ec);
    asio::ip::tcp::socket sock(io);
    if (!ec)
        asio::connect(sock, eps, ec);
    if (ec)
        return {false, "cannot reach the server at " + listen + ": " + ec.message()};
    return exchange(sock, method, arg, timeout_s);
}

std::string human_bytes(std::uint64_t b)
{
    char out[32];
    if (b >= 1024ull * 1024 * 1024)
        std::snprintf(out, sizeof out, "%.1f GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
    else if (b >= 1024ull * 1024)
        std::snprintf(out, sizeof out, "%.1f MiB", static_cast<double>(b) / (1024.0 * 1024));
    else
        std::snprintf(out, sizeof out, "%llu KiB", static_cast<unsigned long long>(b / 1024));
    return out;
}

std::string human_age(std::int64_t s)
{
    char out[32];
    if (s >= 86400)
        std::snprintf(out, sizeof out, "%lldd%02lldh", static_cast<long long>(s / 86400),
                      static_cast<long long>(s % 86400 / 3600));
    else if (s >= 3600)
        std::snprintf(out, sizeof out, "%lldh%02lldm", static_cast<long long>(s / 3600),
                      static_cast<long long>(s % 3600 / 60));
    else if (s >= 60)
        std::snprintf(out, sizeof out, "%lldm%02llds", static_cast<long long>(s / 60),
                      static_cast<long long>(s % 60));
    else
        std::snprintf(out, sizeof out, "%llds", static_cast<long long>(s));
    return out;
}

double number(const json::object &o, const char *key)
{
    auto *v = o.if_contains(key);
    if (!v)
        return 0;
    if (v->is_int64())
        return static_cast<double>(v->as_int64());
    if (v->is_uint64())
        return static_cast<double>(v->as_uint64());
    if (v->is_double())
        return v->as_double();
    return 0;
}

std::string text(const json::object &o, const char *key)
{
    auto *v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string("?");
}

// The table of `ferry workers`.
std::string workers_table(const json::value &v)
{
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-8s %-10s %10s %11s %9s %5s %6s %4s\n", "PID", "STATE", "JOBS",
                  "MEMORY", "AGE", "LOOP", "CPU%", "PIN");
    out += line;
    const auto *workers = v.is_object() ? v.as_object().if_contains("workers") : nullptr;
    if (!workers || !workers->is_array())
        return out;
    for (const auto &w : workers->as_array()) {
        if (!w.is_object())
            continue;
        const auto &o = w.as_object();
        std::string state = text(o, "statusStr");
        if (auto *r = o.if_contains("replacing"); r && r->is_bool() && r->as_bool())
            state += "*";
        const auto *pinned = o.if_contains("pinnedCpu");
        const std::string pin = pinned && pinned->is_int64() && pinned->as_int64() >= 0
                                    ? std::to_string(pinned->as_int64())
                                    : std::string("-");
        std::snprintf(line, sizeof line, "%-8lld %-10s %10llu %11s %9s %5llu %6.1f %4s\n",
                      static_cast<long long>(number(o, "pid")), state.c_str(),
                      static_cast<unsigned long long>(number(o, "numExecs")),
                      human_bytes(static_cast<std::uint64_t>(number(o, "memoryUsage"))).c_str(),
                      human_age(static_cast<std::int64_t>(number(o, "ageSeconds"))).c_str(),
                      static_cast<unsigned long long>(number(o, "loop")), number(o, "CPUPercent"),
                      pin.c_str());
        out += line;
    }
    out += std::to_string(workers->as_array().size()) + " worker(s)";
    out += "; * = waiting for its replacement; PIN = the CPU it is pinned to (http.pool.cpu_affinity)\n";
    return out;
}

volatile std::sig_atomic_t interrupted = 0;

} // namespace

int control_command(const std::string &command, const std::vector<std::string> &args, const conf::Config &cfg)
{
    bool as_json = false, interactive = false;
    std::string pool = "http";
    for (const auto &a : args) {
        if (a == "--json" && command == "workers")
            as_json = true;
        else if ((a == "-i" || a == "--interactive") && command == "workers")
            interactive = true;
        else if ((command == "reset" || command == "workers") && !a.empty() && a[0] != '-')
            pool = a;
        else {
            std::fprintf(stderr, "ferry %s: unknown argument \"%s\"\n", command.c_str(), a.c_str());
            return 2;
        }
    }
    const std::string &listen = cfg.rpc.listen;
    if (listen.empty())
        return fail_with((cfg.source.empty() ? std::string("the configuration") : cfg.source) +
                         " has no rpc.listen: `ferry " + command +
                         "` talks to the server through it (add rpc: {listen: \"tcp://127.0.0.1:6001\"})");
    const std::string arg = json::serialize(json::value(json::string_view(pool)));
    if (command == "reset") {
        auto r = call(listen, "resetter.Reset", arg, 0);
        if (!r.ok)
            return fail_with("reset of \"" + pool + "\" failed: " + r.body);
        std::printf("%s: workers reset\n", pool.c_str());
        return 0;
    }
    if (command == "stop") {
        auto r = call(listen, "ferry.Stop", "true", 10);
        if (!r.ok)
            return fail_with("stop failed: " + r.body);
        std::printf("server stopping (it finishes the requests in flight)\n");
        return 0;
    }
    // workers
    if (interactive)
        std::signal(SIGINT, [](int) { interrupted = 1; });
    for (;;) {
        auto r = call(listen, "informer.Workers", arg, 10);
        if (!r.ok)
            return fail_with(r.body);
        if (as_json) {
            std::printf("%s\n", r.body.c_str());
        } else {
            error_code ec;
            auto v = json::parse(r.body, ec);
            if (ec)
                return fail_with("the server's answer is not JSON: " + ec.message());
            if (interactive)
                std::fputs("\x1b[H\x1b[2J", stdout);
            std::fputs(workers_table(v).c_str(), stdout);
        }
        std::fflush(stdout);
        if (!interactive)
            return 0;
        for (int i = 0; i < 10 && !interrupted; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (interrupted)
            return 0;
    }
}

} // namespace ferry::server
