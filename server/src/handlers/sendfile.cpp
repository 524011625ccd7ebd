#include "sendfile.hpp"

#include "../descriptors.hpp"
#include "../http/response.hpp"
#include "../static/file_answer.hpp"
#include "../transport/transport.hpp"
#include "ferry/base/log.hpp"
#include "ferry/server/http_grammar.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

const relay::HeaderField *find_header(const relay::ResponseContext &rc, std::string_view name)
{
    for (const auto &f : rc.headers)
        if (iequals(f.name, name) && !f.values.empty())
            return &f;
    return nullptr;
}

struct Fd {
    int fd = -1;
    ~Fd()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

} // namespace

std::optional<std::string> take_sendfile(relay::ResponseContext &rc)
{
    auto it = std::find_if(rc.headers.begin(), rc.headers.end(),
                           [](const relay::HeaderField &f) { return iequals(f.name, "X-Sendfile"); });
    if (it == rc.headers.end())
        return std::nullopt;
    std::string path = it->values.empty() ? std::string() : it->values.front();
    rc.headers.erase(it);
    // The server answers ranges of the file itself.
    std::erase_if(rc.headers, [](const relay::HeaderField &f) {
        return iequals(f.name, "Accept-Ranges") || iequals(f.name, "Content-Range");
    });
    return path;
}

awaitable<After> send_named_file(Exchange &ex, const relay::ResponseContext &rc, int status,
                                 const std::string &path, int worker_pid, bool keep_alive,
                                 DescriptorRefusals &refusals)
{
    const bool head_request = ex.request.method == "HEAD";
    const std::string who = "worker " + std::to_string(worker_pid) + ": X-Sendfile \"" + path + "\"";
    auto refuse = [&](int code, std::string_view why) {
        log::warn("http", ex.transport.remote() + " " + ex.request.method + " " + ex.request.target + ": " +
                              std::to_string(code) + ": " + who + " " + std::string(why));
        ex.status = code;
        append_error(ex.out, code,
                     code == 503 ? "the server is out of file descriptors; try again shortly" : "",
                     keep_alive, head_request);
    };
    const After done = keep_alive ? After::keep_alive : After::close;
    if (path.empty() || path.front() != '/' || path.find('\0') != std::string::npos) {
        refuse(500, "is not an absolute path");
        co_return done;
    }
    Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)};
    if (file.fd < 0) {
        const int e = errno;
        if (e == EMFILE || e == ENFILE) {
            refusals.exhausted(FdUser::static_files, e);
            refuse(503, "cannot be opened: no descriptor left");
        } else if (e == ENOENT || e == ENOTDIR) {
            refuse(404, "does not exist");
        } else {
            refuse(403, std::string("cannot be opened: ") + std::strerror(e));
        }
        co_return done;
    }
    struct stat st {};
    if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        refuse(403, "is not a regular file");
        co_return done;
    }
    // The worker's validators when it sent them (Symfony's BinaryFileResponse does), else the file's own.
    std::string extra;
    std::string etag;
    if (const auto *e = find_header(rc, "ETag")) {
        etag = e->values.front();
    } else {
        const auto ns = static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000u +
                        static_cast<std::uint64_t>(st.st_mtim.tv_nsec);
        char buf[64];
        std::snprintf(buf, sizeof buf, "W/\"%llx-%llx\"", static_cast<unsigned long long>(st.st_size),
                      static_cast<unsigned long long>(ns));
        etag = buf;
        extra += "ETag: " + etag + "\r\n";
    }
    if (!find_header(rc, "Last-Modified")) {
        char date[64];
        extra += "Last-Modified: ";
        extra.append(date, format_http_date(st.st_mtim.tv_sec, date));
        extra += "\r\n";
    }
    if (!find_header(rc, "Content-Type"))
        extra += "Content-Type: application/octet-stream\r\n";
    Head h;
    h.status = status;
    h.worker = &rc;
    h.keep_alive = keep_alive;
    h.http10 = ex.request.http10();
    FileAnswer answer;
    answer.fd = file.fd;
    answer.size = static_cast<std::uint64_t>(st.st_size);
    answer.mtime = st.st_mtim.tv_sec;
    answer.etag = etag;
    answer.log_name = "http";
    co_return co_await answer_with_file(ex, answer, h, extra);
}

} // namespace ferry::server::detail
