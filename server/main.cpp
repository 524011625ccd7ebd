// ferry: the command line. `ferry serve` is the main command.
#include "ferry/base/log.hpp"
#include "ferry/conf/config.hpp"
#include "ferry/conf/dotenv.hpp"
#include "ferry/server/server.hpp"
#include "ferry/version.hpp"

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

constexpr const char *usage_text = R"(usage: ferry <command> [options]

commands:
  serve            start the HTTP server and its PHP worker pool (default config: ./.rr.yaml)
  config           print the effective configuration and exit (same as serve --dry-run);
                   config --reference: every key, its values, default and meaning (Markdown)
  workers [pool]   list the running server's workers (pid, state, jobs, memory, age) [--json] [-i: every second]
  reset [pool]     rolling reset of the running server's workers (pool: http, or websockets)
  stop             graceful stop of the running server
                   (workers, reset and stop reach the server through rpc.listen of the same config file)
  version          print the version
  help             this text

options:
  -c, --config FILE        configuration file (default .rr.yaml)
  -o, --override K=V       override a config key, e.g. -o http.pool.num_workers=4 (repeatable)
  -w, --workdir DIR        change to DIR before reading the config and starting workers (default: the
                           config file's directory, as RoadRunner does)
      --dotenv FILE        set the variables of a .env file that the environment lacks (env DOTENV_PATH)
      --dry-run            print the effective configuration and exit
      --strict             unknown keys and RoadRunner keys Ferry does not support are errors, not warnings
      --log-level LEVEL    debug, info, warn, error (default info; env FERRY_LOG_LEVEL)
  -h, --help               this text (after any command too)
)";

int usage_error(const std::string &msg)
{
    std::fprintf(stderr, "ferry: %s\n\n%s", msg.c_str(), usage_text);
    return 2;
}

// logs.* as the logger takes it; conf resolved level and encoding to one of their values.
ferry::log::Options log_options(const ferry::conf::LogsConfig &logs)
{
    ferry::log::Options o;
    ferry::log::parse_level(logs.level, o.level);
    o.encoding = logs.encoding == "json" ? ferry::log::Encoding::json : ferry::log::Encoding::console;
    o.raw = logs.mode == "raw";
    o.off = logs.mode == "off";
    o.output = logs.output;
    return o;
}

// FERRY_PHP_WORKER: the directory of Ferry's PHP library (php-worker/: autoload.php, bin/ferry-laravel), in
// the environment of the workers and of ${FERRY_PHP_WORKER} in the config, unless it is set already: the copy
// installed next to the binary (<prefix>/bin/ferry -> <prefix>/share/ferry/php-worker) or, for a binary run
// from its build directory, the source tree's. Unset when neither is there.
void export_php_library()
{
    if (const char *set = std::getenv("FERRY_PHP_WORKER"); set && *set)
        return;
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return;
    const std::filesystem::path exe(std::string(buf, static_cast<std::size_t>(n)));
    std::vector<std::filesystem::path> candidates{exe.parent_path().parent_path() / "share/ferry/php-worker"};
#if defined(FERRY_BUILD_DIR) && defined(FERRY_SOURCE_DIR)
    std::error_code ec;
    if (std::filesystem::equivalent(exe.parent_path(), FERRY_BUILD_DIR, ec))
        candidates.emplace_back(std::filesystem::path(FERRY_SOURCE_DIR) / "php-worker");
#endif
    for (const auto &dir : candidates)
        if (::access((dir / "autoload.php").c_str(), R_OK) == 0) {
            ::setenv("FERRY_PHP_WORKER", dir.c_str(), 1);
            return;
        }
}

} // namespace

int main(int argc, char **argv)
{
    // Once for the process: writing to a closed socket or to a dead worker's stdin is an EPIPE error.
    std::signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty())
        return usage_error("no command given");
    std::string command = args[0];
    if (command == "help" || command == "-h" || command == "--help") {
        std::fputs(usage_text, stdout);
        return 0;
    }
    if (command == "version" || command == "--version" || command == "-v") {
        std::printf("ferry %s\n", ferry::version);
        return 0;
    }
    if (command == "config" && args.size() == 2 && args[1] == "--reference") {
        std::fputs(ferry::conf::reference().c_str(), stdout);
        return 0;
    }
    const bool control = command == "workers" || command == "reset" || command == "stop";
    if (command != "serve" && command != "config" && !control)
        return usage_error("unknown command \"" + command + "\"");
    std::vector<std::string> control_args; // the control commands' own: --json, -i, a pool name

    std::string config_path = ".rr.yaml";
    bool workdir_given = false;
    std::string dotenv;
    std::vector<std::string> overrides;
    bool dry_run = command == "config";
    bool strict = false;
    std::string level_text;
    if (const char *l = std::getenv("FERRY_LOG_LEVEL"))
        level_text = l;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string &a = args[i];
        auto value = [&](const char *name) -> const std::string * {
            if (i + 1 >= args.size())
                return nullptr;
            (void)name;
            return &args[++i];
        };
        if (a == "-h" || a == "--help") { // `ferry serve --help`: the usage, not an error
            std::fputs(usage_text, stdout);
            return 0;
        }
        if (a == "-c" || a == "--config") {
            auto v = value("-c");
            if (!v)
                return usage_error(a + " needs a file");
            config_path = *v;
        } else if (a == "-o" || a == "--override") {
            auto v = value("-o");
            if (!v)
                return usage_error(a + " needs key.path=value");
            overrides.push_back(*v);
        } else if (a == "-w" || a == "--workdir") {
            auto v = value("-w");
            if (!v)
                return usage_error(a + " needs a directory");
            if (::chdir(v->c_str()) != 0)
                return usage_error("cannot change to " + *v + ": " + std::strerror(errno));
            workdir_given = true;
        } else if (a == "--dotenv") {
            auto v = value("--dotenv");
            if (!v)
                return usage_error(a + " needs a file");
            dotenv = *v;
        } else if (a == "--dry-run") {
            dry_run = true;
        } else if (a == "--strict") {
            strict = true;
        } else if (a == "--log-level") {
            auto v = value("--log-level");
            if (!v)
                return usage_error(a + " needs a level");
            level_text = *v;
        } else if (control) {
            control_args.push_back(a);
        } else {
            return usage_error("unknown option \"" + a + "\"");
        }
    }
    std::optional<ferry::log::Level> cli_level;
    if (!level_text.empty()) {
        ferry::log::Level lvl;
        if (!ferry::log::parse_level(level_text, lvl))
            return usage_error("unknown log level \"" + level_text + "\" (debug, info, warn, error)");
        ferry::log::set_level(lvl);
        cli_level = lvl;
    }

    // Without -w the working directory is the config file's, as RoadRunner's (`ferry serve -c
    // /srv/app/.rr.yaml` runs `php worker.php` in /srv/app, and finds a relative unix:// socket there).
    if (!workdir_given) {
        std::error_code ec;
        const std::filesystem::path file = std::filesystem::absolute(config_path, ec);
        const std::filesystem::path here = std::filesystem::current_path(ec);
        if (!ec && file.parent_path() != here && ::chdir(file.parent_path().c_str()) == 0)
            config_path = file.string();
    }
    // --dotenv, or $DOTENV_PATH as RoadRunner reads it (the option wins), relative to the working directory.
    std::vector<std::string> from_dotenv;
    if (dotenv.empty())
        if (const char *d = std::getenv("DOTENV_PATH"); d && *d)
            dotenv = d;
    if (!dotenv.empty()) {
        auto set = ferry::conf::load_dotenv(dotenv);
        if (!set) {
            std::fprintf(stderr, "ferry: --dotenv: %s\n", set.error().message.c_str());
            return 1;
        }
        from_dotenv = std::move(*set);
    }
    export_php_library();
    const auto loaded = ferry::conf::load_file(config_path, overrides);
    if (!loaded) {
        std::fprintf(stderr, "ferry: config error: %s\n", loaded.error().message.c_str());
        return 1;
    }
    if (strict && !loaded->strict.empty()) {
        for (const std::string &w : loaded->strict) {
            std::fprintf(stderr, "ferry: config error (--strict): %s\n", w.c_str());
        }
        return 1;
    }
    // The server's logs go where and as logs.* says from here on, its config warnings first; the other
    // commands talk to a terminal and keep the defaults. --log-level and FERRY_LOG_LEVEL, given for this
    // run, win over logs.level.
    if (!control && !dry_run) {
        if (auto applied = ferry::log::configure(log_options(loaded->config.logs)); !applied) {
            std::fprintf(stderr, "ferry: logs.output: %s\n", applied.error().message.c_str());
            return 1;
        }
        if (cli_level)
            ferry::log::set_level(*cli_level);
    }
    for (const auto &w : loaded->warnings)
        ferry::log::warn("config", w);
    if (!dotenv.empty()) {
        std::string names;
        for (const std::string &n : from_dotenv)
            names += (names.empty() ? "" : ", ") + n;
        ferry::log::info("config", dotenv + ": " +
                                       (names.empty() ? "no variable set (the environment has them all)"
                                                      : "set " + names));
    }
    if (control) {
        int code = ferry::server::control_command(command, control_args, loaded->config);
        ferry::log::flush();
        return code;
    }
    if (dry_run) {
        std::fputs(ferry::conf::dump(loaded->config).c_str(), stdout);
        ferry::log::flush();
        return 0;
    }
    int code = ferry::server::run(loaded->config);
    ferry::log::flush();
    return code;
}
