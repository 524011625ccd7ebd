#include "ferry/pool/host.hpp"

#include "affinity.hpp"
#include "ferry/conf/config.hpp"
#include "prefork_file.hpp"
#include "process_table.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string_view>
#include <unistd.h>

namespace ferry::pool {

namespace detail {
extern const std::string_view prefork_php; // generated from php-worker/ (pool/cmake/embed_prefork.cmake)

PreforkFile::PreforkFile(const std::string &tmp_dir)
{
    std::string pattern = tmp_dir + "/ferry-prefork-XXXXXX";
    if (!::mkdtemp(pattern.data())) {
        error = "cannot create a directory like " + pattern + ": " + std::strerror(errno);
        return;
    }
    dir = pattern;
    path = dir + "/prefork.php"; // the directory's mode keeps it ours
    std::ofstream out(path, std::ios::binary);
    out.write(prefork_php.data(), static_cast<std::streamsize>(prefork_php.size()));
    out.close();
    if (!out)
        error = "cannot write " + path + ": " + std::strerror(errno);
}

PreforkFile::~PreforkFile()
{
    if (!path.empty())
        ::unlink(path.c_str());
    if (!dir.empty())
        ::rmdir(dir.c_str());
}
} // namespace detail

struct Host::Lazy {
    std::once_flag once;
    std::unique_ptr<detail::PreforkFile> prefork;
};

namespace {
std::string default_tmp_dir()
{
    const char *tmp = std::getenv("TMPDIR");
    return tmp && *tmp ? tmp : "/tmp";
}
} // namespace

Host::Host() : Host(conf::usable_cpu_list(), {}) {}

Host::Host(std::vector<int> cpus, std::string tmp_dir)
    : processes_(std::make_unique<detail::ProcessTable>()),
      cpus_(std::make_unique<detail::CpuPins>(std::move(cpus))),
      tmp_dir_(tmp_dir.empty() ? default_tmp_dir() : std::move(tmp_dir)), lazy_(std::make_unique<Lazy>())
{
}

Host::~Host() = default;

const detail::PreforkFile &Host::prefork_file() const
{
    std::call_once(lazy_->once, [this] { lazy_->prefork = std::make_unique<detail::PreforkFile>(tmp_dir_); });
    return *lazy_->prefork;
}

} // namespace ferry::pool
