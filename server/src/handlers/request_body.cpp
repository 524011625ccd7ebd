#include "request_body.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::server::detail {

int open_temp_file(const std::string &dir)
{
    int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
    std::string path = dir + "/ferry-body-XXXXXX";
    fd = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd >= 0)
        ::unlink(path.c_str());
    return fd;
}

RequestBody::RequestBody(Budget &budget, std::uint64_t memory_max, std::string dir)
    : budget_(budget), memory_max_(memory_max), dir_(std::move(dir))
{
}

RequestBody::~RequestBody()
{
    clear();
}

void RequestBody::clear()
{
    if (size_ == 0 && fd_ < 0 && reserved_.bytes() == 0 && mem_.capacity() <= 4096)
        return; // nothing held: the common case of a request without a body
    if (fd_ >= 0)
        ::close(fd_);
    fd_ = -1;
    size_ = 0;
    mem_.clear();
    if (mem_.capacity() > 4096)
        std::string().swap(mem_);
    reserved_.reset();
}

void RequestBody::begin(std::uint64_t expected)
{
    clear();
    // A body announced larger than memory_max goes to a file from its first byte (no copy of what was kept).
    if (expected > memory_max_) {
        (void)spill(); // on failure write() tries again and reports it
    } else if (expected > 0 && reserved_.grow_request(budget_, expected) == Budget::Take::ok) {
        mem_.reserve(static_cast<std::size_t>(expected));
    }
}

HttpResult<void> RequestBody::spill()
{
    fd_ = open_temp_file(dir_);
    if (fd_ < 0)
        return HttpError{500, "cannot create a temp file for the request body in " + dir_ + ": " +
                                  std::strerror(errno)};
    auto r = append_file(mem_); // what was kept so far
    std::string().swap(mem_);
    reserved_.reset();
    return r;
}

HttpResult<void> RequestBody::append_file(std::string_view bytes)
{
    const char *p = bytes.data();
    std::size_t left = bytes.size();
    while (left > 0) {
        ssize_t n = ::write(fd_, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return HttpError{500, "cannot write the request body to a temp file in " + dir_ + ": " +
                                      std::strerror(n < 0 ? errno : ENOSPC)};
        p += n;
        left -= static_cast<std::size_t>(n);
    }
    return {};
}

HttpResult<void> RequestBody::write(std::string_view bytes)
{
    if (fd_ < 0) {
        std::uint64_t after = size_ + bytes.size();
        std::uint64_t need = after > reserved_.bytes() ? after - reserved_.bytes() : 0;
        if (after <= memory_max_ &&
            (need == 0 || reserved_.grow_request(budget_, need) == Budget::Take::ok)) {
            mem_.append(bytes.data(), bytes.size());
            size_ = after;
            return {};
        }
        if (auto r = spill(); !r)
            return r;
    }
    if (auto r = append_file(bytes); !r)
        return r;
    size_ += bytes.size();
    return {};
}

pool::BodyRef RequestBody::ref() const
{
    pool::BodyRef r;
    r.size = size_;
    if (fd_ >= 0)
        r.fd = fd_;
    else
        r.memory = mem_;
    return r;
}

} // namespace ferry::server::detail
