// The RPC methods (rpc_server.hpp): RoadRunner's resetter.* and informer.* with its field names, ferry.Stop,
// and the extension's (websockets.*); the listener and its sessions are in rpc_server.cpp.
#include "rpc_server.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <unistd.h>

namespace ferry::server::detail {

namespace json = boost::json;

namespace {

Result<std::string> ok(std::string s)
{
    return Result<std::string>(boost::system::in_place_value, std::move(s));
}

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

} // namespace ferry::server::detail
