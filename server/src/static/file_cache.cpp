#include "file_cache.hpp"

#include "../http/response.hpp"

#include <boost/crc.hpp>

#include <array>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

// Where a descriptor leads ("" if unknown).
std::string fd_path(int fd)
{
    std::array<char, 4096> buf{};
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
    return n > 0 && static_cast<std::size_t>(n) < buf.size()
               ? std::string(buf.data(), static_cast<std::size_t>(n))
               : std::string();
}

// Opens `rel` under `root` without leaving it: openat2(RESOLVE_BENEATH) makes the kernel refuse any path,
// symlink included, that resolves outside the root (EXDEV), atomically with the open. `follow`: symlinks
// may lead anywhere (http.static.follow_symlinks). Never blocks on a FIFO (O_NONBLOCK).
int open_beneath(int root, const std::string &rel, bool follow)
{
    const char *path = rel.empty() ? "." : rel.c_str();
    const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    if (follow)
        return ::openat(root, path, flags);
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd;
    do {
        fd = static_cast<int>(::syscall(SYS_openat2, root, path, &how, sizeof how));
    } while (fd < 0 && errno == EAGAIN);
    if (fd >= 0 || errno != ENOSYS)
        return fd;
    // A kernel before 5.6 (or a seccomp filter without openat2): open, then check where it really led.
    fd = ::openat(root, path, flags);
    if (fd < 0)
        return fd;
    std::string root_path = fd_path(root), file_path = fd_path(fd);
    if (root_path.empty() ||
        !(file_path == root_path || file_path.starts_with(root_path == "/" ? "/" : root_path + "/"))) {
        ::close(fd);
        errno = EXDEV;
        return -1;
    }
    return fd;
}

std::string hex(std::uint64_t v)
{
    std::array<char, 20> buf{};
    int n = std::snprintf(buf.data(), buf.size(), "%llx", static_cast<unsigned long long>(v));
    return std::string(buf.data(), static_cast<std::size_t>(n));
}

// CRC-32 of the content, read once per file version (a few ms per 10 MiB); empty if a read fails.
std::string content_etag(int fd, std::uint64_t size)
{
    boost::crc_32_type crc;
    std::array<char, 64 * 1024> buf;
    std::uint64_t off = 0;
    while (off < size) {
        ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return {};
        crc.process_bytes(buf.data(), static_cast<std::size_t>(n));
        off += static_cast<std::uint64_t>(n);
    }
    return "\"" + hex(crc.checksum()) + "-" + hex(size) + "\"";
}

} // namespace

StaticFile::~StaticFile()
{
    if (fd >= 0)
        ::close(fd);
}

FileCache::FileCache(int root_fd, const conf::StaticConfig &config, const MimeTypes &mime)
    : root_fd_(root_fd), config_(config), mime_(mime)
{
}

FoundFile FileCache::open(const std::string &rel, const FoundFile *cached)
{
    FoundFile out;
    int fd = open_beneath(root_fd_, rel, config_.follow_symlinks);
    if (fd < 0) {
        out.kind = errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG ? FoundFile::Kind::missing
                                                                                : FoundFile::Kind::forbidden;
        return out;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
        ::close(fd);
        out.kind = FoundFile::Kind::forbidden;
        return out;
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        out.kind = FoundFile::Kind::directory;
        return out;
    }
    out.kind = FoundFile::Kind::file;
    if (cached && cached->kind == FoundFile::Kind::file) {
        const StaticFile &old = *cached->file;
        if (old.dev == st.st_dev && old.ino == st.st_ino &&
            old.size == static_cast<std::uint64_t>(st.st_size) && old.mtime.tv_sec == st.st_mtim.tv_sec &&
            old.mtime.tv_nsec == st.st_mtim.tv_nsec) {
            ::close(fd); // unchanged: keep the descriptor and the ETag we have
            out.file = cached->file;
            return out;
        }
    }
    auto f = std::make_shared<StaticFile>();
    f->fd = fd;
    f->size = static_cast<std::uint64_t>(st.st_size);
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->mtime = st.st_mtim;
    char date[64];
    f->last_modified.assign(date, format_http_date(st.st_mtim.tv_sec, date));
    f->content_type = mime_.for_file(rel);
    if (config_.calculate_etag && !config_.weak)
        f->etag = content_etag(fd, f->size);
    if (f->etag.empty()) {
        auto ns = static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
                  static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
        f->etag = "W/\"" + hex(f->size) + "-" + hex(ns) + "\"";
    }
    out.file = std::move(f);
    return out;
}

const FoundFile &FileCache::find(const std::string &rel, clock::time_point now)
{
    if (rel.size() > max_cached_path) {
        uncached_ = open(rel, nullptr);
        return uncached_;
    }
    auto it = map_.find(rel);
    if (it != map_.end()) {
        Entry &e = it->second;
        if (e.lru != lru_.begin())
            lru_.splice(lru_.begin(), lru_, e.lru);
        if (now - e.checked >= revalidate_after) {
            e.found = open(rel, &e.found);
            e.checked = now;
        }
        return e.found;
    }
    if (map_.size() >= config_.max_open_files && !lru_.empty()) {
        map_.erase(*lru_.back()); // the least recently used; a response still sending it keeps its file
        lru_.pop_back();
    }
    auto [ins, inserted] = map_.emplace(rel, Entry{open(rel, nullptr), now, {}});
    (void)inserted;
    lru_.push_front(&ins->first);
    ins->second.lru = lru_.begin();
    return ins->second.found;
}

} // namespace ferry::server::detail
