#include "file_cache.hpp"

#include "../descriptors.hpp"
#include "../http/response.hpp"
#include "path.hpp"

#include <boost/crc.hpp>

#include <algorithm>
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

int openat2_retry(int root, const char *path, const open_how &how)
{
    int fd;
    do {
        fd = static_cast<int>(::syscall(SYS_openat2, root, path, &how, sizeof how));
    } while (fd < 0 && errno == EAGAIN);
    return fd;
}

// Opens `rel` under `root` without leaving it: openat2(RESOLVE_BENEATH) makes the kernel refuse any path,
// symlink included, that resolves outside the root (EXDEV), atomically with the open. `follow`: symlinks
// may lead anywhere (http.static.follow_symlinks). Never blocks on a FIFO (O_NONBLOCK). `symlinked`: the
// path went through a symlink (the first try refuses any, RESOLVE_NO_SYMLINKS, so a path without one costs
// one call), or it is unknown whether it did; the caller then checks where it led (target_refused()).
int open_beneath(int root, const std::string &rel, bool follow, bool &symlinked)
{
    symlinked = false;
    const char *path = rel.empty() ? "." : rel.c_str();
    const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    open_how how{};
    how.flags = static_cast<std::uint64_t>(flags);
    const std::uint64_t bounds = follow ? 0 : RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    how.resolve = bounds | RESOLVE_NO_SYMLINKS;
    int fd = openat2_retry(root, path, how);
    if (fd < 0 && errno == ELOOP) {
        symlinked = true;
        how.resolve = bounds;
        fd = openat2_retry(root, path, how);
    }
    if (fd >= 0 || errno != ENOSYS)
        return fd;
    // A kernel before 5.6 (or a seccomp filter without openat2): open, then check where it really led.
    symlinked = true;
    fd = ::openat(root, path, flags);
    if (fd < 0 || follow)
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

bool out_of_descriptors(int error)
{
    return error == EMFILE || error == ENFILE;
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

FileCache::FileCache(int root_fd, const conf::StaticConfig &config, const MimeTypes &mime,
                     std::size_t max_entries, DescriptorRefusals *refusals)
    : root_fd_(root_fd), root_path_(fd_path(root_fd)),
      max_entries_(std::max<std::size_t>(1, max_entries == 0
                                                ? config.max_open_files
                                                : std::min<std::size_t>(max_entries, config.max_open_files))),
      config_(config), mime_(mime), refusals_(refusals)
{
}

bool FileCache::target_refused(int fd, bool regular) const
{
    const std::string real = fd_path(fd);
    if (real.empty() || root_path_.empty())
        return true; // where it led cannot be told: not served
    std::string_view below = real;
    if (real == root_path_)
        below = {};
    else if (root_path_ == "/")
        below.remove_prefix(1);
    else if (real.starts_with(root_path_) && real[root_path_.size()] == '/')
        below.remove_prefix(root_path_.size() + 1);
    // else outside the root (follow_symlinks): every segment of its path counts
    return has_hidden_segment(below) || (regular && extension_denied(config_, real));
}

FoundFile FileCache::open(const std::string &rel, const FoundFile *cached)
{
    FoundFile out;
    bool symlinked = false;
    int fd = open_beneath(root_fd_, rel, config_.follow_symlinks, symlinked);
    if (fd < 0) {
        out.kind = errno == ENOENT || errno == ENOTDIR || errno == ENAMETOOLONG ? FoundFile::Kind::missing
                   : out_of_descriptors(errno)                                  ? FoundFile::Kind::exhausted
                                                                                : FoundFile::Kind::forbidden;
        return out;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
        ::close(fd);
        out.kind = FoundFile::Kind::forbidden;
        return out;
    }
    // The hidden-file rule holds for what a symlink leads to, not only for the name asked for: "env.txt ->
    // .env" and "pub -> .git" are refused as "/.env" and "/.git/..." are.
    if (symlinked && target_refused(fd, S_ISREG(st.st_mode))) {
        ::close(fd);
        out.kind = FoundFile::Kind::hidden;
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

FoundFile FileCache::open_or_shed(const std::string &rel, const FoundFile *cached, const std::string *keep)
{
    FoundFile out = open(rel, cached);
    if (out.kind != FoundFile::Kind::exhausted)
        return out;
    const int error = errno;
    if (shed(keep) > 0)
        out = open(rel, cached);
    if (out.kind == FoundFile::Kind::exhausted && refusals_)
        refusals_->exhausted(FdUser::static_files, error);
    return out;
}

std::size_t FileCache::shed(const std::string *keep)
{
    std::size_t closed = 0;
    for (auto it = lru_.begin(); it != lru_.end();) {
        auto entry = map_.find(**it);
        const auto &file = entry->second.found.file;
        if (*it == keep || !file || file.use_count() > 1) { // no descriptor, or a response still sends it
            ++it;
            continue;
        }
        it = lru_.erase(it);
        map_.erase(entry);
        ++closed;
    }
    return closed;
}

void FileCache::erase_lru_back()
{
    map_.erase(*lru_.back()); // a response still sending it keeps its file
    lru_.pop_back();
}

void FileCache::sweep(clock::time_point now)
{
    while (!lru_.empty() && now - map_.find(*lru_.back())->second.used >= inactive)
        erase_lru_back();
}

const FoundFile &FileCache::find(const std::string &rel, clock::time_point now)
{
    if (rel.size() > max_cached_path) {
        uncached_ = open_or_shed(rel, nullptr, nullptr);
        return uncached_;
    }
    auto it = map_.find(rel);
    if (it != map_.end()) {
        Entry &e = it->second;
        e.used = now;
        if (e.lru != lru_.begin())
            lru_.splice(lru_.begin(), lru_, e.lru);
        if (now - e.checked >= revalidate_after) {
            FoundFile fresh = open_or_shed(rel, &e.found, &it->first);
            // No descriptor to look again with: the version known a second ago serves until there is one.
            if (fresh.kind != FoundFile::Kind::exhausted) {
                e.found = std::move(fresh);
                e.checked = now;
            }
        }
        return e.found;
    }
    FoundFile found = open_or_shed(rel, nullptr, nullptr);
    if (found.kind == FoundFile::Kind::exhausted) { // never cached: the next request tries again
        uncached_ = std::move(found);
        return uncached_;
    }
    if (map_.size() >= max_entries_ && !lru_.empty())
        erase_lru_back(); // the least recently used
    auto [ins, inserted] = map_.emplace(rel, Entry{std::move(found), now, now, {}});
    (void)inserted;
    lru_.push_front(&ins->first);
    ins->second.lru = lru_.begin();
    return ins->second.found;
}

} // namespace ferry::server::detail
