// The worker script check (worker_script.hpp): php's command line read as php reads it, far enough to find
// the script; the file opened for reading from the working directory the workers will have.
#include "worker_script.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits.h>
#include <string_view>
#include <unistd.h>

namespace ferry::server::detail {

std::optional<std::string> php_script_of(const std::vector<std::string> &command)
{
    if (command.empty()) {
        return std::nullopt;
    }
    const std::string_view exe = command[0];
    const std::string_view base =
        exe.substr(exe.rfind('/') == std::string_view::npos ? 0 : exe.rfind('/') + 1);
    if (!base.starts_with("php") || base.starts_with("php-")) { // php, php8.2; not php-fpm, php-cgi
        return std::nullopt;
    }
    for (std::size_t i = 1; i < command.size(); ++i) {
        const std::string &a = command[i];
        if (a == "--" || a == "-f" || a == "--file") {
            return i + 1 < command.size() ? std::optional<std::string>(command[i + 1]) : std::nullopt;
        }
        if (a == "-d" || a == "-c" || a == "-z" || a == "--define" || a == "--php-ini" ||
            a == "--zend-extension") {
            ++i; // an option with its value in the next argument
            continue;
        }
        if (a.size() > 1 && a[0] == '-') {
            if (a.starts_with("-r") || a.starts_with("-B") || a.starts_with("-R") || a.starts_with("-E") ||
                a.starts_with("-F") || a == "-a" || a.starts_with("-S") || a == "-i" || a == "-m" ||
                a == "-v") {
                return std::nullopt; // inline code, a server, or no script at all
            }
            continue; // -n, -q, -dkey=value, -e…
        }
        return a;
    }
    return std::nullopt;
}

std::optional<std::string> check_worker_script(const std::vector<std::string> &command)
{
    const std::optional<std::string> script = php_script_of(command);
    if (!script) {
        return std::nullopt;
    }
    const int fd = ::open(script->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ::close(fd);
        return std::nullopt;
    }
    const int err = errno;
    char cwd[PATH_MAX];
    const std::string dir = ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "?";
    return "server.command: cannot open " + *script + " (in " + dir + "): " + std::strerror(err);
}

} // namespace ferry::server::detail
