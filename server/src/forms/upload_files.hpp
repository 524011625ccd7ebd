// Upload temp files that outlive a crash (internal to server/). A file part of a multipart form goes to a
// named temp file in http.uploads.dir (PHP needs a path), deleted after the response; a server killed with
// -9 cannot delete them. So each server marks its files with its own tag, "ferry-upload-<pid>-<random>-",
// and holds an flock on "ferry-upload-<pid>-<random>.lock" in the same directory for as long as it runs. At
// start, files whose tag's lock is gone or can be taken belong to a server that is no longer running: they
// are removed (and logged). A lock, not the pid: servers in other PID namespaces (containers) may share the
// directory, and a pid may be reused; the kernel drops a dead process's flock, whatever killed it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::server::detail {

struct StaleUploads {
    unsigned files = 0;      // upload files removed
    std::uint64_t bytes = 0; // their size
    std::vector<int> pids;   // the servers that left them
};

class UploadsDir {
public:
    UploadsDir() = default;
    ~UploadsDir();
    UploadsDir(const UploadsDir &) = delete;
    UploadsDir &operator=(const UploadsDir &) = delete;

    // Takes this server's tag in `dir` (creates and locks its lock file) and removes what servers no longer
    // running left there. False (errno set) when the lock file cannot be made.
    bool claim(const std::string &dir, StaleUploads &removed);
    // "ferry-upload-<pid>-<random>-": the start of this server's upload file names ("ferry-upload-" before
    // claim()).
    const std::string &prefix() const { return prefix_; }

private:
    std::string dir_, prefix_ = "ferry-upload-", lock_path_;
    int lock_fd_ = -1;
};

// Removes the upload files in `dir` of every tag but `own` ("" = none) whose server is gone. Exposed for
// tests.
StaleUploads remove_stale_uploads(const std::string &dir, const std::string &own);

// "removed 3 stale upload file(s), 600.0 MB, left by pid 1234" (for the start's log line).
std::string describe(const StaleUploads &s);

} // namespace ferry::server::detail
