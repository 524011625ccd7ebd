// The file watcher (docs/architecture.md, "Reload"): reports, after a quiet `interval`, which files matching
// the patterns changed under the watched directories, so that the server resets the workers. inotify, with
// new directories watched as they appear (and the files already in them counted); polling (a stat walk every
// poll_interval) when inotify is unavailable, exhausted (max_user_watches) or asked for. One burst of changes
// (a `git checkout` of 500 files) is one report.
#pragma once

#include "ferry/base/io.hpp"
#include "ferry/base/result.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ferry::pool {

struct WatchOptions {
    std::vector<std::string> dirs{"."};
    std::vector<std::string> patterns{"**/*.php"}; // globs (pool/src/glob.hpp) or RoadRunner suffixes
    std::vector<std::string> ignore;               // directory names, relative paths or globs
    bool recursive = true;
    std::chrono::milliseconds interval{100};       // quiet time before a report
    std::string backend = "auto";                  // auto | inotify | poll
    std::chrono::milliseconds poll_interval{1000}; // polling backend
};

class Watcher {
public:
    // `on_change(files)`: the changed paths (dir-prefixed, as configured), at most once per burst.
    Watcher(asio::io_context &io, WatchOptions options,
            std::function<void(const std::vector<std::string> &files)> on_change);
    ~Watcher();
    Watcher(const Watcher &) = delete;
    Watcher &operator=(const Watcher &) = delete;

    // Sets up the backend and starts watching; logs which one runs. An error names a directory that cannot
    // be watched at all (missing).
    Result<void> start();
    void stop();
    // "inotify" or "poll" once started.
    const std::string &backend() const;

    struct Impl;

private:
    std::shared_ptr<Impl> impl_;
};

} // namespace ferry::pool
