// One event loop's cache of open static files and stat results, positive and negative (internal to
// server/). No lock: each loop has its own. A cached result is trusted for one second, then the path is
// opened and compared again (device, inode, size, mtime), so a file changed on disk is served new within a
// second, with a new descriptor and a new ETag; a response in flight keeps the version it started with.
// Entries unused for `inactive` are dropped (their descriptors closed) by sweep(), which the loop's ticker
// calls; and when the process runs out of descriptors, the unused ones are given up first.
#pragma once

#include "descriptors.hpp"
#include "ferry/conf/config.hpp"
#include "mime.hpp"

#include <chrono>
#include <cstdint>
#include <ctime>
#include <list>
#include <memory>
#include <string>
#include <sys/types.h>
#include <unordered_map>

namespace ferry::server::detail {

// One version of one regular file, open; the responses sending it share it.
struct StaticFile {
    int fd = -1;
    std::uint64_t size = 0;
    dev_t dev = 0;
    ino_t ino = 0;
    timespec mtime{};
    std::string etag;          // "\"...\"" (from the content) or W/"size-mtime"
    std::string last_modified; // HTTP-date of mtime
    std::string_view content_type;

    StaticFile() = default;
    StaticFile(const StaticFile &) = delete;
    StaticFile &operator=(const StaticFile &) = delete;
    ~StaticFile();
};

struct FoundFile {
    enum class Kind {
        file,      // `file` is open
        directory, // look for its index
        missing,   // no such file (or not a directory on the way)
        forbidden, // a symlink out of the root, a device, FIFO or socket, no permission
        hidden,    // a symlink (the file or a directory on the way) resolving to a dotfile or dot-directory,
                // or to a name whose extension http.static.forbid/allow refuse: as that name's URL would be
        exhausted, // no descriptor left to open it (EMFILE, ENFILE): never cached, try again later
    };
    Kind kind = Kind::missing;
    std::shared_ptr<const StaticFile> file;
};

class FileCache {
public:
    using clock = std::chrono::steady_clock;
    static constexpr auto revalidate_after = std::chrono::seconds(1);
    // Longer paths are looked up every time, never kept: a client sending long random paths cannot make a
    // loop keep max_open_files × 8 KiB of keys.
    static constexpr std::size_t max_cached_path = 256;
    // An entry unused this long is dropped and its descriptor closed (nginx's open_file_cache inactive=):
    // after a burst of clients over many files the server gives their descriptors back within seconds.
    static constexpr auto inactive = std::chrono::seconds(3);

    // `root_fd`: the static directory (O_PATH), owned by the caller and open as long as this cache.
    // `max_entries`: at most this many entries (so open descriptors), http.static.max_open_files or less
    // when the descriptor limit is low (server.cpp sizes it). `refusals`: where an open refused for want of a
    // descriptor is counted and logged (null: nowhere).
    FileCache(int root_fd, const conf::StaticConfig &config, const MimeTypes &mime,
              std::size_t max_entries = 0, DescriptorRefusals *refusals = nullptr);

    // `rel` as StaticPath::rel gives it ("" = the root). The reference is valid until the next find().
    const FoundFile &find(const std::string &rel, clock::time_point now);
    // Drops the entries unused for `inactive`; the descriptors no response holds close.
    void sweep(clock::time_point now);
    std::size_t size() const { return map_.size(); }
    std::size_t capacity() const { return max_entries_; }

private:
    struct Entry {
        FoundFile found;
        clock::time_point checked;
        clock::time_point used;
        std::list<const std::string *>::iterator lru;
    };
    FoundFile open(const std::string &rel, const FoundFile *cached);
    // open(), and when no descriptor is left, once more after closing the unused cached ones but `keep`'s
    // (the key of `cached`'s entry).
    FoundFile open_or_shed(const std::string &rel, const FoundFile *cached, const std::string *keep);
    // Drops cached files no response holds (their descriptors close); gives how many. `keep`: not this one.
    std::size_t shed(const std::string *keep);
    void erase_lru_back();
    // Refuses a symlinked file whose real path has a hidden segment below the root or a refused extension.
    bool target_refused(int fd, bool regular) const;

    int root_fd_;
    std::string root_path_; // where root_fd_ leads, for symlinked paths ("" if /proc says nothing)
    std::size_t max_entries_;
    const conf::StaticConfig &config_;
    const MimeTypes &mime_;
    DescriptorRefusals *refusals_;
    std::unordered_map<std::string, Entry> map_;
    std::list<const std::string *> lru_; // keys of map_, most recently used first
    FoundFile uncached_;                 // the result for a path too long to keep
};

} // namespace ferry::server::detail
