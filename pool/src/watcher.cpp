// The file watcher. inotify through its system calls: Debian's libinotifytools keeps its watches in global
// state and reads blocking, which fits no event loop; the three calls it wraps are all we need. Globs:
// glob.hpp (fnmatch(3) per segment).
#include "ferry/pool/watcher.hpp"

#include "ferry/base/log.hpp"
#include "glob.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace ferry::pool {

namespace fs = std::filesystem;

namespace {
using clock = std::chrono::steady_clock;

constexpr std::uint32_t watch_mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                                     IN_ATTRIB | IN_DELETE_SELF | IN_ONLYDIR;

std::string join(const std::string &a, const std::string &b)
{
    if (a.empty())
        return b;
    if (b.empty())
        return a;
    return a + "/" + b;
}

struct Stamp {
    std::int64_t mtime_ns;
    std::int64_t size;
    std::uint64_t ino;
    bool operator==(const Stamp &) const = default;
};
} // namespace

struct Watcher::Impl : std::enable_shared_from_this<Impl> {
    Impl(asio::io_context &io_, WatchOptions o, std::function<void(const std::vector<std::string> &)> cb)
        : io(io_), opt(std::move(o)), on_change(std::move(cb)), quiet(io_), poll_timer(io_)
    {
        for (const auto &p : opt.patterns)
            patterns.emplace_back(p);
        for (const auto &p : opt.ignore)
            ignores.emplace_back(p);
    }

    asio::io_context &io;
    WatchOptions opt;
    std::function<void(const std::vector<std::string> &)> on_change;
    std::vector<detail::Glob> patterns, ignores;
    std::string backend;
    bool stopped = false;

    // inotify
    int ifd = -1;
    std::unique_ptr<asio::posix::stream_descriptor> sd;
    struct Dir {
        std::size_t root;
        std::string rel;
    };
    std::unordered_map<int, Dir> wds;
    bool exhausted = false;

    // polling
    std::map<std::string, Stamp> snapshot;
    asio::steady_timer quiet, poll_timer;

    // debounce
    static constexpr std::size_t max_pending = 10000;
    std::set<std::string> pending;
    std::size_t pending_dropped = 0; // changes beyond max_pending in this burst
    bool armed = false;
    clock::time_point first, last;

    std::string shown(std::size_t root, const std::string &rel) const
    {
        const std::string &r = opt.dirs[root];
        return r == "." ? rel : join(r, rel);
    }
    bool ignored(const std::string &rel, const std::string &name) const
    {
        if (name == ".git")
            return true;
        for (const auto &g : ignores)
            if (g.match(rel))
                return true;
        return false;
    }
    bool matches(const std::string &rel) const
    {
        for (const auto &g : patterns)
            if (g.match(rel))
                return true;
        return false;
    }

    // ---- debounce ---------------------------------------------------------------------------------

    std::chrono::milliseconds max_wait() const
    {
        return std::max(std::chrono::milliseconds(1000), 10 * opt.interval);
    }

    void note(std::string path)
    {
        // Bounded: a process writing files without end under a watched directory must not grow the set.
        if (pending.size() < max_pending)
            pending.insert(std::move(path));
        else
            ++pending_dropped;
        last = clock::now();
        if (armed)
            return;
        armed = true;
        first = last;
        asio::co_spawn(io, debounce(shared_from_this()), log_exceptions{"reload debounce"});
    }

    static awaitable<void> debounce(std::shared_ptr<Impl> self)
    {
        for (;;) {
            auto due = std::min(self->last + self->opt.interval, self->first + self->max_wait());
            if (clock::now() >= due)
                break;
            self->quiet.expires_at(due);
            co_await self->quiet.async_wait(nothrow);
            if (self->stopped)
                co_return;
        }
        self->armed = false;
        std::vector<std::string> files(self->pending.begin(), self->pending.end());
        if (self->pending_dropped > 0)
            files.push_back("(" + std::to_string(self->pending_dropped) + " more changes not listed)");
        self->pending.clear();
        self->pending_dropped = 0;
        self->on_change(files);
    }

    // ---- inotify ----------------------------------------------------------------------------------

    // Watches `rel` under root `root` and, when recursive, the directories below it. False when inotify ran
    // out of watches.
    bool add_tree(std::size_t root, const std::string &rel)
    {
        const std::string path = join(opt.dirs[root], rel);
        int wd = ::inotify_add_watch(ifd, path.c_str(), watch_mask);
        if (wd < 0) {
            if (errno == ENOSPC || errno == ENOMEM) {
                exhausted = true;
                return false;
            }
            log::debug("reload", "cannot watch \"" + path + "\": " + std::strerror(errno));
            return true;
        }
        wds[wd] = Dir{root, rel};
        if (!opt.recursive)
            return true;
        error_code ec;
        for (fs::directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
             !ec && it != end; it.increment(ec)) {
            if (!it->is_directory(ec) || it->is_symlink(ec))
                continue;
            std::string name = it->path().filename().string();
            std::string sub = join(rel, name);
            if (!ignored(sub, name) && !add_tree(root, sub))
                return false;
        }
        return true;
    }

    // The files already in a directory that appeared (created before its watch was added).
    void note_files_in(std::size_t root, const std::string &rel)
    {
        walk(root, rel,
             [this, root](const std::string &file, const struct stat &) { note(shown(root, file)); });
    }

    void forget_below(const std::string &rel, std::size_t root)
    {
        for (auto it = wds.begin(); it != wds.end();) {
            if (it->second.root == root &&
                (it->second.rel == rel || it->second.rel.rfind(rel + "/", 0) == 0)) {
                ::inotify_rm_watch(ifd, it->first);
                it = wds.erase(it);
            } else {
                ++it;
            }
        }
    }

    void handle(const inotify_event &ev)
    {
        if (ev.mask & IN_Q_OVERFLOW) {
            note("(inotify event queue overflowed)");
            return;
        }
        auto it = wds.find(ev.wd);
        if (it == wds.end())
            return;
        if (ev.mask & IN_IGNORED) {
            wds.erase(it);
            return;
        }
        const Dir dir = it->second; // the map may change below
        std::string name = ev.len ? std::string(ev.name) : std::string();
        std::string rel = join(dir.rel, name);
        if (ev.mask & IN_ISDIR) {
            if (name.empty() || ignored(rel, name))
                return;
            if ((ev.mask & (IN_CREATE | IN_MOVED_TO)) && opt.recursive) {
                if (!add_tree(dir.root, rel))
                    return;
                note_files_in(dir.root, rel);
            } else if (ev.mask & (IN_MOVED_FROM | IN_DELETE)) {
                forget_below(rel, dir.root);
            }
            return;
        }
        if (!name.empty() && matches(rel))
            note(shown(dir.root, rel));
    }

    // Reads and handles every event queued. A plain function: the buffer must be aligned for inotify_event,
    // which a coroutine frame does not guarantee (GCC 12; UBSan saw it misaligned).
    void drain_events()
    {
        alignas(inotify_event) char buf[64 * 1024];
        for (;;) {
            ssize_t n = ::read(ifd, buf, sizeof buf);
            if (n <= 0)
                return;
            for (char *p = buf; p < buf + n;) {
                auto *ev = reinterpret_cast<inotify_event *>(p);
                handle(*ev);
                p += sizeof(inotify_event) + ev->len;
            }
        }
    }

    static awaitable<void> read_loop(std::shared_ptr<Impl> self)
    {
        while (!self->stopped) {
            auto [ec] = co_await self->sd->async_wait(asio::posix::stream_descriptor::wait_read, nothrow);
            if (ec || self->stopped)
                co_return;
            self->drain_events();
            if (self->exhausted) {
                log::warn("reload",
                          "inotify ran out of watches (fs.inotify.max_user_watches): polling every " +
                              std::to_string(self->opt.poll_interval.count()) + " ms instead");
                self->close_inotify();
                self->start_polling();
                co_return;
            }
        }
    }

    void close_inotify()
    {
        if (sd) {
            error_code ignored_ec;
            sd->close(ignored_ec); // closes ifd
            sd.reset();
            ifd = -1;
        } else if (ifd >= 0) {
            ::close(ifd);
            ifd = -1;
        }
        wds.clear();
    }

    Result<void> start_inotify()
    {
        ifd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (ifd < 0)
            return fail(std::string("inotify_init1: ") + std::strerror(errno));
        for (std::size_t r = 0; r < opt.dirs.size(); ++r)
            if (!add_tree(r, "")) {
                close_inotify();
                return fail("inotify ran out of watches (fs.inotify.max_user_watches)");
            }
        sd = std::make_unique<asio::posix::stream_descriptor>(io, ifd);
        backend = "inotify";
        asio::co_spawn(io, read_loop(shared_from_this()), log_exceptions{"reload"});
        return {};
    }

    // ---- polling ----------------------------------------------------------------------------------

    template <typename F> void walk(std::size_t root, const std::string &rel, F &&each) const
    {
        const std::string path = join(opt.dirs[root], rel);
        error_code ec;
        for (fs::directory_iterator it(path, fs::directory_options::skip_permission_denied, ec), end;
             !ec && it != end; it.increment(ec)) {
            std::string name = it->path().filename().string();
            std::string sub = join(rel, name);
            struct stat st;
            if (::lstat(it->path().c_str(), &st) != 0)
                continue;
            if (S_ISDIR(st.st_mode)) {
                if (opt.recursive && !ignored(sub, name))
                    walk(root, sub, each);
            } else if (S_ISREG(st.st_mode) && matches(sub)) {
                each(sub, st);
            }
        }
    }

    std::map<std::string, Stamp> scan() const
    {
        std::map<std::string, Stamp> out;
        for (std::size_t r = 0; r < opt.dirs.size(); ++r)
            walk(r, "", [&](const std::string &file, const struct stat &st) {
                out[shown(r, file)] = Stamp{st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                                            static_cast<std::int64_t>(st.st_size), st.st_ino};
            });
        return out;
    }

    void start_polling()
    {
        backend = "poll";
        snapshot = scan();
        asio::co_spawn(io, poll_loop(shared_from_this()), log_exceptions{"reload poll"});
    }

    static awaitable<void> poll_loop(std::shared_ptr<Impl> self)
    {
        while (!self->stopped) {
            self->poll_timer.expires_after(self->opt.poll_interval);
            co_await self->poll_timer.async_wait(nothrow);
            if (self->stopped)
                co_return;
            auto now = self->scan();
            for (const auto &[path, stamp] : now)
                if (auto it = self->snapshot.find(path); it == self->snapshot.end() || !(it->second == stamp))
                    self->note(path);
            for (const auto &[path, stamp] : self->snapshot)
                if (!now.count(path))
                    self->note(path);
            self->snapshot = std::move(now);
        }
    }
};

Watcher::Watcher(asio::io_context &io, WatchOptions options,
                 std::function<void(const std::vector<std::string> &)> on_change)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(on_change)))
{
}

Watcher::~Watcher()
{
    stop();
}

Result<void> Watcher::start()
{
    Impl &w = *impl_;
    for (const auto &d : w.opt.dirs) {
        error_code ec;
        if (!fs::is_directory(d, ec))
            return fail("reload.dirs: \"" + d + "\" is not a directory");
    }
    std::string why_not;
    if (w.opt.backend != "poll") {
        auto started = w.start_inotify();
        if (!started && w.opt.backend == "inotify")
            return fail("reload.backend: inotify: " + started.error().message);
        if (!started)
            why_not = started.error().message;
    }
    if (w.backend.empty())
        w.start_polling();
    std::string dirs, pats;
    for (const auto &d : w.opt.dirs)
        dirs += (dirs.empty() ? "" : ", ") + d;
    for (const auto &p : w.opt.patterns)
        pats += (pats.empty() ? "" : ", ") + p;
    std::string how =
        w.backend == "inotify"
            ? "inotify, " + std::to_string(w.wds.size()) + " director" + (w.wds.size() == 1 ? "y" : "ies")
            : "polling every " + std::to_string(w.opt.poll_interval.count()) + " ms" +
                  (why_not.empty() ? std::string() : " (" + why_not + ")");
    log::info("reload", "watching " + dirs + " for " + pats + " (" + how + "); workers reset " +
                            std::to_string(w.opt.interval.count()) + " ms after the last change");
    return {};
}

void Watcher::stop()
{
    if (!impl_ || impl_->stopped)
        return;
    impl_->stopped = true;
    impl_->quiet.cancel();
    impl_->poll_timer.cancel();
    impl_->close_inotify();
}

const std::string &Watcher::backend() const
{
    return impl_->backend;
}

} // namespace ferry::pool
