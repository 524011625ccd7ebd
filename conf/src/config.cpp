// The public entry points: loading a file or a string into a Config through the key tables, dump() and
// reference().
#include "ferry/conf/config.hpp"

#include "file.hpp"

#include "keys.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ferry::conf {

std::vector<int> usable_cpu_list()
{
    std::vector<int> out;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0)
        return out;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set))
            out.push_back(c);
    return out;
}

unsigned usable_cpus()
{
    if (const auto n = usable_cpu_list().size(); n > 0)
        return static_cast<unsigned>(n);
    long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<unsigned>(online) : 1u;
}

unsigned default_io_threads(unsigned cpus, unsigned pinned_workers)
{
    return std::max(pinned_workers >= 2 ? 2u : 1u, (cpus + 1) / 2);
}

bool pins_workers(CpuAffinity affinity, bool debug, unsigned workers, unsigned usable_cpus,
                  unsigned free_cpus)
{
    return affinity == CpuAffinity::automatic && !debug && usable_cpus >= 2 && workers <= free_cpus;
}

unsigned pinned_http_workers(const PoolConfig &pool, unsigned cpus)
{
    return pins_workers(pool.cpu_affinity, pool.debug, pool.num_workers, cpus, cpus) ? pool.num_workers : 0;
}

EnvLookup process_env()
{
    return [](const std::string &name) -> std::optional<std::string> {
        const char *value = std::getenv(name.c_str());
        if (value == nullptr) {
            return std::nullopt;
        }
        return std::string(value);
    };
}

Result<LoadResult> load_string(const std::string &yaml, const std::string &name,
                               const std::vector<std::string> &overrides, const EnvLookup &env)
{
    LoadResult result;
    Result<std::vector<std::string>> warnings =
        schema::load(keys::config(), result.config, yaml, name, overrides, env, &result.strict);
    if (!warnings) {
        return warnings.error();
    }
    result.config.source = name;
    result.warnings = std::move(*warnings);
    return result;
}

namespace {

// What a file that is not a regular one is, for the message.
const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a special file";
}

} // namespace

Result<std::string> detail::read_regular_file(const std::string &path, std::uint64_t max,
                                              const std::string &prefix, std::string_view kind)
{
    const auto cannot_read = [&](int error) { return fail(prefix + std::strerror(error)); };
    const auto too_large = [&](const std::string &size) {
        return fail(prefix + "it is " + size + ", more than the " + std::to_string(max >> 20) + " MiB " +
                    std::string(kind) + " may have");
    };
    // O_NONBLOCK: opening a FIFO does not wait for a writer (fstat then refuses it); a regular file reads
    // as without it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        return cannot_read(errno);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int error = errno;
        ::close(fd);
        return cannot_read(error);
    }
    if (!S_ISREG(st.st_mode)) { // /dev/zero would fill memory, a FIFO block, a directory fail to read
        ::close(fd);
        return fail(prefix + "it is " + file_kind(st.st_mode) + ", not a regular file");
    }
    if (static_cast<std::uint64_t>(st.st_size) > max) {
        ::close(fd);
        return too_large(std::to_string(st.st_size) + " bytes");
    }
    std::string content;
    content.reserve(static_cast<std::size_t>(st.st_size));
    char buffer[16384];
    while (true) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            const int error = errno;
            ::close(fd);
            return cannot_read(error);
        }
        if (n == 0) {
            break;
        }
        content.append(buffer, static_cast<std::size_t>(n));
        if (content.size() > max) { // grown since fstat
            ::close(fd);
            return too_large("more than " + std::to_string(max) + " bytes");
        }
    }
    ::close(fd);
    return Result<std::string>(boost::system::in_place_value,
                               std::move(content)); // (Error is made of a string too)
}

Result<LoadResult> load_file(const std::string &path, const std::vector<std::string> &overrides,
                             const EnvLookup &env)
{
    auto content = detail::read_regular_file(
        path, max_config_file_size, path + ": cannot read the configuration file: ", "a configuration file");
    if (!content)
        return content.error();
    return load_string(*content, path, overrides, env);
}

std::string dump(const Config &config)
{
    return schema::dump(keys::config(), config,
                        "Ferry effective configuration: sizes in bytes, durations as Go strings");
}

std::string reference()
{
    static const Config defaults{};
    return schema::reference(keys::config().section(), &defaults, R"md(# Configuration reference

Every key Ferry reads from its `.rr.yaml`, generated by `ferry config --reference` from the key tables the
loader itself uses (`conf/src/keys*.cpp`); a test fails when this file and the command differ. For what changes
coming from RoadRunner, see [roadrunner.md](roadrunner.md); `ferry config -c FILE` prints a file's effective
configuration.

- The file is YAML, a regular file of at most 4 MiB. `$VAR`, `${VAR}` and `${VAR:-default}` in any string are
  replaced from the environment; `-o key.path=value` (repeatable) overrides a key from the command line.
- **Sizes**: `512B`, `64KB`, `1MB`, `1GB` (1 KB = 1024 bytes); a bare number is megabytes, RoadRunner's rule
  for `max_request_size`.
- **Durations**: `500ms`, `60s`, `1m30s`, `1h`; a bare number is seconds, with a warning (RoadRunner reads
  nanoseconds there).
- A key Ferry does not know is a warning (with "did you mean" when one is close), not an error; so is a
  RoadRunner key Ferry recognises but does not support (listed under each section).
- A section whose default is "absent (off)" turns its feature on by being present, even empty.
)md");
}

} // namespace ferry::conf
