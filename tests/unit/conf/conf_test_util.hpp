// Shared by the conf tests: a fake environment, loading a string, the error message of a load, the CPU count,
// and two configurations (a minimal one and one setting every key).
#pragma once

#include "ferry/conf/config.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <sched.h>
#include <string>
#include <thread>
#include <vector>

namespace conf_test {

// What every conf test file uses (`using namespace conf_test;` brings them in).
using namespace std::chrono_literals;
using ferry::conf::Config;
using ferry::conf::Duration;
using ferry::conf::EnvLookup;
using ferry::conf::LoadResult;

inline EnvLookup fake_env(std::map<std::string, std::string> vars = {})
{
    return [vars = std::move(vars)](const std::string &name) -> std::optional<std::string> {
        const auto it = vars.find(name);
        if (it == vars.end()) {
            return std::nullopt;
        }
        return it->second;
    };
}

// The result of loading `yaml` as ".rr.yaml"; a test failure (and defaults) when it does not load.
inline LoadResult load(const std::string &yaml, const std::vector<std::string> &overrides = {},
                       const EnvLookup &env = fake_env())
{
    auto r = ferry::conf::load_string(yaml, ".rr.yaml", overrides, env);
    if (!r) {
        ADD_FAILURE() << "config error: " << r.error().message << "\nfor:\n" << yaml;
        return {};
    }
    return std::move(*r);
}

// The config error's message of loading `yaml`, or "" (and a test failure) when it loads.
inline std::string error_of(const std::string &yaml, const std::vector<std::string> &overrides = {},
                            const EnvLookup &env = fake_env())
{
    const auto r = ferry::conf::load_string(yaml, ".rr.yaml", overrides, env);
    if (r) {
        ADD_FAILURE() << "no config error for:\n" << yaml;
        return "";
    }
    return r.error().message;
}

// The CPUs this process may run on, counted independently of conf: what num_workers: 0 becomes.
inline unsigned cpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(::sched_getaffinity(0, sizeof set, &set), 0);
    const int n = CPU_COUNT(&set);
    return n <= 0 ? 1u : static_cast<unsigned>(n);
}

inline bool contains(const std::string &haystack, const std::string &needle)
{
    return haystack.find(needle) != std::string::npos;
}

inline const std::string minimal = "version: \"3\"\nserver:\n  command: php worker.php\n";

inline const std::string full = R"(version: "3"
server:
  command: "php -d memory_limit=256M worker.php"
  env:
    app_env: production
    Mixed_Case: "1"
  relay: pipes
http:
  address: 0.0.0.0:9000
  max_request_size: 16
  internal_error_code: 502
  limits:
    max_request_line: 4KB
    max_header_size: 32KB
    max_pipelined: 4
  timeouts:
    read_header: 5s
    read_body: 1m30s
    write: 2m
    idle: 500ms
  middleware: [static, proxy_ip_parser]
  static:
    dir: public
    forbid: [PHP, ".htaccess"]
    allow: [css, .JS]
    calculate_etag: true
    weak: true
    request:
      X-Req: a
    response:
      X-Frame-Options: DENY
      Cache-Tag: "assets, v2"
    index: [index.htm, default.html]
    precompressed: true
    cache_control: "public, max-age=60"
    on_forbidden: "403"
    on_missing: "404"
    follow_symlinks: true
    max_open_files: 77
  pool:
    num_workers: 3
    max_jobs: 1000
    allocate_timeout: 1.5s
    destroy_timeout: 1h
    debug: true
    supervisor:
      exec_ttl: 2m
      client_gone_ttl: 3s
      exec_warn: 10s
      watch_tick: 250ms
      ttl: 1h
      idle_ttl: 30s
      max_worker_memory: 256
)";

} // namespace conf_test
