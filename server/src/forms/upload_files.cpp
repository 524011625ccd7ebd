#include "upload_files.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <map>
#include <random>
#include <string_view>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

constexpr std::string_view base = "ferry-upload-";
constexpr std::string_view lock_suffix = ".lock";

// "<pid>-<8 hex>" at the start of what follows "ferry-upload-" (the tag), or empty.
std::string_view tag_of(std::string_view rest)
{
    auto dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos || rest.size() < dash + 9)
        return {};
    for (std::size_t i = 0; i < dash; ++i)
        if (rest[i] < '0' || rest[i] > '9')
            return {};
    for (std::size_t i = dash + 1; i < dash + 9; ++i)
        if (!std::isxdigit(static_cast<unsigned char>(rest[i])))
            return {};
    return rest.substr(0, dash + 9);
}

struct Tag {
    std::vector<std::string> files; // upload files (names)
    bool lock = false;              // its lock file is there
};

} // namespace

StaleUploads remove_stale_uploads(const std::string &dir, const std::string &own)
{
    StaleUploads out;
    std::map<std::string, Tag> tags;
    if (DIR *d = ::opendir(dir.c_str())) {
        while (dirent *e = ::readdir(d)) {
            std::string_view name = e->d_name;
            if (name.substr(0, base.size()) != base)
                continue;
            std::string_view rest = name.substr(base.size());
            std::string_view tag = tag_of(rest);
            if (tag.empty() || tag == own)
                continue; // an older server's name without a tag: its owner cannot be told, left alone
            std::string_view after = rest.substr(tag.size());
            if (after == lock_suffix)
                tags[std::string(tag)].lock = true;
            else if (after.size() > 1 && after[0] == '-')
                tags[std::string(tag)].files.emplace_back(name);
        }
        ::closedir(d);
    }
    const uid_t me = ::geteuid();
    for (auto &[tag, t] : tags) {
        const std::string lock = dir + "/" + std::string(base) + tag + std::string(lock_suffix);
        int fd = -1;
        if (t.lock) {
            fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
            if (fd < 0)
                continue;
            if (::flock(fd, LOCK_EX | LOCK_NB) != 0) { // its server runs
                ::close(fd);
                continue;
            }
        }
        bool counted = false;
        for (const auto &name : t.files) {
            const std::string path = dir + "/" + name;
            struct stat sb {};
            if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != me)
                continue;
            if (::unlink(path.c_str()) != 0)
                continue;
            ++out.files;
            out.bytes += static_cast<std::uint64_t>(sb.st_size);
            counted = true;
        }
        if (fd >= 0) {
            ::unlink(lock.c_str());
            ::close(fd);
        }
        if (counted) {
            int pid = 0;
            std::from_chars(tag.data(), tag.data() + tag.find('-'), pid);
            out.pids.push_back(pid);
        }
    }
    return out;
}

std::string describe(const StaleUploads &s)
{
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.1f MB", static_cast<double>(s.bytes) / (1024.0 * 1024.0));
    std::string out = "removed " + std::to_string(s.files) + " stale upload file(s), " + mb + ", left by pid";
    if (s.pids.size() > 1)
        out += "s";
    for (std::size_t i = 0; i < s.pids.size(); ++i)
        out += (i ? ", " : " ") + std::to_string(s.pids[i]);
    return out;
}

UploadsDir::~UploadsDir()
{
    if (lock_fd_ >= 0) {
        ::unlink(lock_path_.c_str());
        ::close(lock_fd_);
    }
}

bool UploadsDir::claim(const std::string &dir, StaleUploads &removed)
{
    std::random_device rd;
    char rnd[16];
    std::snprintf(rnd, sizeof rnd, "%08x", static_cast<unsigned>(rd()));
    const std::string tag = std::to_string(::getpid()) + "-" + rnd;
    // Locked under a name no scan looks at, then renamed into place: a scan never sees it unlocked.
    const std::string tmp = dir + "/" + std::string(base) + tag + ".locking";
    int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    const std::string lock = dir + "/" + std::string(base) + tag + std::string(lock_suffix);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || ::rename(tmp.c_str(), lock.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        ::close(fd);
        errno = err;
        return false;
    }
    dir_ = dir;
    lock_fd_ = fd;
    lock_path_ = lock;
    prefix_ = std::string(base) + tag + "-";
    removed = remove_stale_uploads(dir, tag);
    return true;
}

} // namespace ferry::server::detail
