#include "control.hpp"

#include "ferry/base/log.hpp"
#include "ferry/pool/watcher.hpp"
#include "probe_server.hpp"
#include "rpc_server.hpp"

#include <boost/asio/signal_set.hpp>

#include <csignal>
#include <numeric>

namespace ferry::server::detail {

namespace {
constexpr std::size_t files_shown = 5; // a reset's log line names at most this many files

std::string describe_changes(const std::vector<std::string> &files)
{
    std::string out;
    for (std::size_t i = 0; i < files.size() && i < files_shown; ++i)
        out += (i ? ", " : "") + relay::printable(files[i], 200);
    if (files.size() > files_shown)
        out += " and " + std::to_string(files.size() - files_shown) + " more";
    return std::to_string(files.size()) + " file(s) changed: " + out;
}
} // namespace

struct Control::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, const conf::Config &c, ControlCounters &n, std::function<void()> s)
        : io(io_), cfg(c), counters(n), stop_server(std::move(s)), hup(io_)
    {
    }
    asio::io_context &io;
    const conf::Config &cfg;
    ControlCounters &counters;
    std::function<void()> stop_server;
    std::function<std::optional<Result<std::string>>(std::string_view, std::string_view)> extension;
    const Pools *pools = nullptr; // set by start()
    std::unique_ptr<RpcServer> rpc;
    std::unique_ptr<pool::Watcher> watcher;
    asio::signal_set hup;
    std::function<void(std::string_view)> on_reset;
    bool stopped = false;

    // A rolling reset of one pool ("http", "websockets"), or of every pool ("": the watcher, SIGHUP): the
    // websockets workers run the same code.
    awaitable<Result<pool::ResetReport>> reset(std::string why, std::string which = {})
    {
        if (stopped || !pools)
            co_return fail("the server is stopping");
        if (on_reset && (which.empty() || which == "http"))
            on_reset(why);
        if (!which.empty()) {
            pool::Pool *p = pools->find(which);
            if (!p)
                co_return fail("no " + which + " workers");
            co_return co_await p->reset(std::move(why));
        }
        // Every pool in turn (each logs how its reset went); the answer is the first failure, else the sum.
        pool::ResetReport total;
        std::optional<Result<pool::ResetReport>> failed;
        for (const auto &e : pools->all()) {
            if (stopped)
                break;
            auto done = co_await e.pool->reset(why);
            if (!done && !failed)
                failed = std::move(done);
            else if (done) {
                total.replaced += done->replaced;
                total.killed += done->killed;
            }
        }
        if (failed)
            co_return std::move(*failed);
        co_return total;
    }

    static awaitable<void> reset_logged(std::shared_ptr<Impl> self, std::string why)
    {
        co_await self->reset(std::move(why)); // the pool logs how it went
    }

    static awaitable<void> watch_hup(std::shared_ptr<Impl> self)
    {
        for (;;) {
            auto [ec, sig] = co_await self->hup.async_wait(nothrow);
            if (ec || self->stopped)
                co_return;
            log::info("core",
                      "received SIGHUP: rolling reset of the workers (the configuration is not re-read)");
            asio::co_spawn(self->io, reset_logged(self, "SIGHUP"), log_exceptions{"reset"});
        }
    }
};

Control::Control(asio::io_context &io, const conf::Config &cfg, ControlCounters &counters,
                 std::function<void()> stop)
    : impl_(std::make_shared<Impl>(io, cfg, counters, std::move(stop)))
{
    // SIGHUP is taken from the start: before the workers are ready it resets nothing, but must not end the
    // server (its default action).
    error_code ec;
    impl_->hup.add(SIGHUP, ec);
}

Control::~Control()
{
    stop();
}

void Control::on_reset(std::function<void(std::string_view why)> f)
{
    impl_->on_reset = std::move(f);
}

void Control::set_rpc_extension(
    std::function<std::optional<Result<std::string>>(std::string_view method, std::string_view arg)> f)
{
    impl_->extension = std::move(f);
}

Result<void> Control::bind()
{
    Impl &c = *impl_;
    if (c.cfg.rpc.listen.empty())
        return {};
    RpcTarget target;
    target.extension = c.extension;
    for (const auto &w : c.cfg.server.command)
        target.command += (target.command.empty() ? "" : " ") + w;
    std::weak_ptr<Impl> weak = impl_;
    target.stop = [weak] { // posted: the caller's answer is written before the stop begins
        if (auto self = weak.lock())
            asio::post(self->io, [weak] {
                if (auto s = weak.lock(); s && s->stop_server)
                    s->stop_server();
            });
    };
    target.reset = [weak](std::string why, std::string plugin) -> awaitable<Result<pool::ResetReport>> {
        auto self = weak.lock();
        if (!self)
            return [](std::string) -> awaitable<Result<pool::ResetReport>> {
                co_return fail("the server is stopping");
            }(std::move(why));
        return self->reset(std::move(why), std::move(plugin));
    };
    c.rpc =
        std::make_unique<RpcServer>(c.io, c.cfg.rpc, std::move(target), c.counters, rpc_payload_limit(c.cfg));
    if (auto key = rpc_rides(c.cfg); !key.empty())
        c.rpc->ride(std::move(key));
    return c.rpc->bind();
}

void Control::ride(ProbeServer &l)
{
    std::weak_ptr<Impl> weak = impl_;
    l.hand_over(opens_rpc_frame, [weak](StreamSocket sock, std::string peer) {
        if (auto self = weak.lock(); self && self->rpc)
            self->rpc->adopt(std::move(sock), std::move(peer));
    });
}

std::string Control::rpc_address() const
{
    return impl_->rpc ? impl_->rpc->address() : std::string();
}

Result<void> Control::start(const Pools &pools)
{
    Impl &c = *impl_;
    c.pools = &pools;
    if (c.rpc) {
        c.rpc->set_pools(&pools);
        c.rpc->run();
    }
    asio::co_spawn(c.io, Impl::watch_hup(impl_), log_exceptions{"SIGHUP"});
    if (c.cfg.reload.enabled) {
        const auto &r = c.cfg.reload;
        pool::WatchOptions w;
        w.dirs = r.dirs;
        w.patterns = r.patterns;
        w.ignore = r.ignore;
        w.recursive = r.recursive;
        w.interval = std::chrono::duration_cast<std::chrono::milliseconds>(r.interval);
        w.backend = r.backend;
        w.poll_interval = std::chrono::duration_cast<std::chrono::milliseconds>(r.poll_interval);
        std::weak_ptr<Impl> weak = impl_;
        c.watcher =
            std::make_unique<pool::Watcher>(c.io, std::move(w), [weak](const std::vector<std::string> &f) {
                auto self = weak.lock();
                if (!self || self->stopped)
                    return;
                std::string why = describe_changes(f);
                log::info("reload", why + ": resetting the workers");
                asio::co_spawn(self->io, Impl::reset_logged(self, why), log_exceptions{"reset"});
            });
        if (auto started = c.watcher->start(); !started)
            return started;
    }
    return {};
}

awaitable<bool> Control::join(std::chrono::steady_clock::time_point deadline)
{
    if (!impl_->rpc)
        co_return true;
    co_return co_await impl_->rpc->join(deadline);
}

void Control::stop()
{
    if (!impl_ || impl_->stopped)
        return;
    impl_->stopped = true;
    if (impl_->watcher)
        impl_->watcher->stop();
    if (impl_->rpc)
        impl_->rpc->stop();
    error_code ignored;
    impl_->hup.cancel(ignored);
}

} // namespace ferry::server::detail
