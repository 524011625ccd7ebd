#include "ferry/conf/config.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace std::chrono_literals;
using ferry::conf::Config;
using ferry::conf::ConfigError;
using ferry::conf::Duration;
using ferry::conf::EnvLookup;
using ferry::conf::load_file;
using ferry::conf::load_string;
using ferry::conf::LoadResult;

namespace {

EnvLookup fake_env(std::map<std::string, std::string> vars = {})
{
    return [vars = std::move(vars)](const std::string &name) -> std::optional<std::string> {
        const auto it = vars.find(name);
        if (it == vars.end()) {
            return std::nullopt;
        }
        return it->second;
    };
}

LoadResult load(const std::string &yaml, const std::vector<std::string> &overrides = {},
                const EnvLookup &env = fake_env())
{
    return load_string(yaml, ".rr.yaml", overrides, env);
}

// The ConfigError message of loading `yaml`, or "" (and a test failure) when it loads.
std::string error_of(const std::string &yaml, const std::vector<std::string> &overrides = {},
                     const EnvLookup &env = fake_env())
{
    try {
        load(yaml, overrides, env);
    } catch (const ConfigError &e) {
        return e.what();
    }
    ADD_FAILURE() << "no ConfigError for:\n" << yaml;
    return "";
}

unsigned cpus()
{
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : n;
}

bool contains(const std::string &haystack, const std::string &needle)
{
    return haystack.find(needle) != std::string::npos;
}

const std::string minimal = "version: \"3\"\nserver:\n  command: php worker.php\n";

const std::string full = R"(version: "3"
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
  pool:
    num_workers: 3
    max_jobs: 1000
    allocate_timeout: 1.5s
    destroy_timeout: 1h
    supervisor:
      exec_ttl: 2m
      exec_warn: 10s
)";

} // namespace

// ---- every key --------------------------------------------------------------------------------------

TEST(ConfLoad, EveryKeyParsed)
{
    const LoadResult r = load(full);
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
    const Config &c = r.config;
    EXPECT_EQ(c.version, "3");
    EXPECT_EQ(c.source, ".rr.yaml");
    EXPECT_EQ(c.server.command, (std::vector<std::string>{"php", "-d", "memory_limit=256M", "worker.php"}));
    const std::vector<std::pair<std::string, std::string>> env{{"APP_ENV", "production"},
                                                               {"MIXED_CASE", "1"}};
    EXPECT_EQ(c.server.env, env);
    EXPECT_EQ(c.server.relay, "pipes");
    EXPECT_EQ(c.http.address, "0.0.0.0:9000");
    EXPECT_EQ(c.http.max_request_size, 16u * 1024 * 1024);
    EXPECT_EQ(c.http.internal_error_code, 502);
    EXPECT_EQ(c.http.max_request_line, 4u * 1024);
    EXPECT_EQ(c.http.max_header_size, 32u * 1024);
    EXPECT_EQ(c.http.max_pipelined, 4u);
    EXPECT_EQ(c.http.read_header_timeout, 5s);
    EXPECT_EQ(c.http.read_body_timeout, 90s);
    EXPECT_EQ(c.http.write_timeout, 120s);
    EXPECT_EQ(c.http.idle_timeout, 500ms);
    EXPECT_EQ(c.http.pool.num_workers, 3u);
    EXPECT_EQ(c.http.pool.max_jobs, 1000u);
    EXPECT_EQ(c.http.pool.allocate_timeout, 1500ms);
    EXPECT_EQ(c.http.pool.destroy_timeout, 3600s);
    EXPECT_EQ(c.http.pool.exec_ttl, 120s);
    EXPECT_EQ(c.http.pool.exec_warn, 10s);
}

TEST(ConfLoad, Defaults)
{
    const LoadResult r = load(minimal);
    EXPECT_TRUE(r.warnings.empty());
    const Config &c = r.config;
    EXPECT_EQ(c.version, "3");
    EXPECT_EQ(c.server.command, (std::vector<std::string>{"php", "worker.php"}));
    EXPECT_TRUE(c.server.env.empty());
    EXPECT_EQ(c.server.relay, "pipes");
    EXPECT_EQ(c.http.address, "127.0.0.1:8080");
    EXPECT_EQ(c.http.max_request_size, 1ull << 30);
    EXPECT_EQ(c.http.internal_error_code, 500);
    EXPECT_EQ(c.http.max_request_line, 8192u);
    EXPECT_EQ(c.http.max_header_size, 65536u);
    EXPECT_EQ(c.http.max_pipelined, 16u);
    EXPECT_EQ(c.http.read_header_timeout, 10s);
    EXPECT_EQ(c.http.read_body_timeout, 60s);
    EXPECT_EQ(c.http.write_timeout, 60s);
    EXPECT_EQ(c.http.idle_timeout, 75s);
    EXPECT_EQ(c.http.pool.num_workers, cpus());
    EXPECT_EQ(c.http.pool.max_jobs, 0u);
    EXPECT_EQ(c.http.pool.allocate_timeout, 60s);
    EXPECT_EQ(c.http.pool.destroy_timeout, 60s);
}

TEST(ConfLoad, EmptySectionsKeepDefaults)
{
    const LoadResult r = load(minimal + "http:\n  pool:\n  limits:\n");
    EXPECT_TRUE(r.warnings.empty());
    EXPECT_EQ(r.config.http.address, "127.0.0.1:8080");
    EXPECT_EQ(r.config.http.pool.num_workers, cpus());
}

TEST(ConfLoad, NumWorkersZeroMeansCpus)
{
    EXPECT_EQ(load(minimal + "http:\n  pool:\n    num_workers: 0\n").config.http.pool.num_workers, cpus());
    EXPECT_EQ(load(minimal + "http:\n  pool:\n    num_workers: 7\n").config.http.pool.num_workers, 7u);
}

TEST(ConfLoad, Version27AcceptedAndMissingVersionWarns)
{
    EXPECT_EQ(load("version: '2.7'\nserver:\n  command: php w.php\n").config.version, "2.7");
    const LoadResult r = load("server:\n  command: php w.php\n");
    EXPECT_EQ(r.config.version, "3");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "version")) << r.warnings[0];
}

TEST(ConfLoad, AddressForms)
{
    const auto address = [](const std::string &value) {
        return load(minimal + "http:\n  address: \"" + value + "\"\n").config.http.address;
    };
    EXPECT_EQ(address(":8080"), "0.0.0.0:8080");
    EXPECT_EQ(address("localhost:0"), "localhost:0");
    EXPECT_EQ(address("[::1]:65535"), "[::1]:65535");
    EXPECT_EQ(address("127.0.0.1:80"), "127.0.0.1:80");
}

TEST(ConfLoad, Sizes)
{
    const auto request = [](const std::string &value) {
        return load(minimal + "http:\n  max_request_size: " + value + "\n").config.http.max_request_size;
    };
    EXPECT_EQ(request("1"), 1u << 20);
    EXPECT_EQ(request("10MB"), 10u << 20);
    EXPECT_EQ(request("512KB"), 512u << 10);
    EXPECT_EQ(request("1GB"), 1u << 30);
    EXPECT_EQ(request("2gb"), 2ull << 30);
    EXPECT_EQ(request("100B"), 100u);
    EXPECT_EQ(request("\"10 MB\""), 10u << 20);
    const auto header = [](const std::string &value) {
        return load(minimal + "http:\n  limits:\n    max_header_size: " + value + "\n")
            .config.http.max_header_size;
    };
    EXPECT_EQ(header("8192"), 8192u);
    EXPECT_EQ(header("64KB"), 65536u);
    EXPECT_EQ(header("1MB"), 1u << 20);
}

// ---- server.command -----------------------------------------------------------------------------

TEST(ConfCommand, StringSplitOnSpaces)
{
    const LoadResult r = load("version: '3'\nserver:\n  command: \"  php   -f\tworker.php \"\n");
    EXPECT_EQ(r.config.server.command, (std::vector<std::string>{"php", "-f", "worker.php"}));
}

TEST(ConfCommand, ListKeepsArgumentsWhole)
{
    const LoadResult r = load("version: '3'\nserver:\n  command: [php, \"my worker.php\", \"\"]\n");
    EXPECT_EQ(r.config.server.command, (std::vector<std::string>{"php", "my worker.php", ""}));
    const LoadResult block = load("version: '3'\nserver:\n  command:\n    - php\n    - w.php\n");
    EXPECT_EQ(block.config.server.command, (std::vector<std::string>{"php", "w.php"}));
}

TEST(ConfCommand, Errors)
{
    std::string e = error_of("version: '3'\nhttp:\n  address: :80\n");
    EXPECT_TRUE(contains(e, "server.command")) << e;
    EXPECT_TRUE(contains(e, "missing")) << e;

    e = error_of("version: '3'\nserver:\n  relay: pipes\n");
    EXPECT_TRUE(contains(e, ".rr.yaml:3:3: server.command: missing")) << e;

    e = error_of("version: '3'\nserver:\n  command: \"   \"\n");
    EXPECT_TRUE(contains(e, ".rr.yaml:3:12: server.command: \"   \" is not a valid value")) << e;

    e = error_of("version: '3'\nserver:\n  command: []\n");
    EXPECT_TRUE(contains(e, ".rr.yaml:3:12: server.command: an empty list")) << e;

    e = error_of("version: '3'\nserver:\n  command:\n    - php\n    - {a: b}\n");
    EXPECT_TRUE(
        contains(e, ".rr.yaml:5:7: server.command[1]: a map is not a valid value (expected a string)"))
        << e;

    e = error_of("version: '3'\nserver:\n  command:\n");
    EXPECT_TRUE(contains(e, ":3:") && contains(e, "server.command: no value given")) << e;
}

// ---- server.env and ${VAR} expansion ------------------------------------------------------------

TEST(ConfEnv, KeysUpperCasedValuesExpanded)
{
    const LoadResult r = load(minimal + "  env:\n    db_host: ${DB_HOST}\n    Port: ${DB_PORT:-5432}\n"
                                        "    empty: ${NOPE}\n    nothing:\n    literal: $HOME\n",
                              {}, fake_env({{"DB_HOST", "db.local"}}));
    const std::vector<std::pair<std::string, std::string>> env{
        {"DB_HOST", "db.local"}, {"PORT", "5432"}, {"EMPTY", ""}, {"NOTHING", ""}, {"LITERAL", "$HOME"}};
    EXPECT_EQ(r.config.server.env, env);
}

TEST(ConfEnv, DuplicateAfterUpperCasingWarns)
{
    const LoadResult r = load(minimal + "  env:\n    a: 1\n    A: 2\n");
    const std::vector<std::pair<std::string, std::string>> env{{"A", "2"}};
    EXPECT_EQ(r.config.server.env, env);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], ".rr.yaml:6:5:")) << r.warnings[0];
    EXPECT_TRUE(contains(r.warnings[0], "\"A\" is set twice")) << r.warnings[0];
}

TEST(ConfEnv, ExpansionInNestedListsAndMaps)
{
    const std::string yaml = R"(version: "${VERSION:-3}"
server:
  command:
    - ${PHP:-php}
    - "${APP_DIR:-/srv}/worker.php"
    - --mode=${MODE:-${FALLBACK_MODE:-prod}}
  env:
    greeting: "hello ${USER_NAME:-nobody}"
http:
  address: "${HOST:-127.0.0.1}:${PORT}"
  pool:
    num_workers: ${WORKERS:-2}
    allocate_timeout: ${ALLOC:-3s}
)";
    const LoadResult r =
        load(yaml, {}, fake_env({{"PHP", "/usr/bin/php8.2"}, {"PORT", "8181"}, {"MODE", ""}}));
    EXPECT_EQ(r.config.version, "3");
    EXPECT_EQ(r.config.server.command,
              (std::vector<std::string>{"/usr/bin/php8.2", "/srv/worker.php", "--mode=prod"}));
    const std::vector<std::pair<std::string, std::string>> env{{"GREETING", "hello nobody"}};
    EXPECT_EQ(r.config.server.env, env);
    EXPECT_EQ(r.config.http.address, "127.0.0.1:8181");
    EXPECT_EQ(r.config.http.pool.num_workers, 2u);
    EXPECT_EQ(r.config.http.pool.allocate_timeout, 3s);

    const LoadResult set = load(yaml, {}, fake_env({{"PORT", "1"}, {"WORKERS", "9"}, {"MODE", "dev"}}));
    EXPECT_EQ(set.config.http.pool.num_workers, 9u);
    EXPECT_EQ(set.config.server.command.back(), "--mode=dev");
}

TEST(ConfEnv, ExpandEnvFunction)
{
    const EnvLookup env = fake_env({{"A", "x"}, {"EMPTY", ""}, {"B", "${A}"}});
    struct Case {
        std::string in, out;
    };
    const std::vector<Case> cases{
        {"plain", "plain"},
        {"${A}", "x"},
        {"a${A}b${A}c", "axbxc"},
        {"${UNSET}", ""},
        {"${UNSET:-def}", "def"},
        {"${EMPTY:-def}", "def"},
        {"${A:-def}", "x"},
        {"${UNSET:-}", ""},
        {"${UNSET:-a:-b}", "a:-b"},
        {"${UNSET:-${A}y}", "xy"},
        {"${B}", "${A}"}, // values are not expanded again
        {"$A $ {A} }", "$A $ {A} }"},
        {"", ""},
    };
    for (const Case &c : cases) {
        EXPECT_EQ(ferry::conf::expand_env(c.in, env), c.out) << c.in;
    }
    for (const std::string bad : {"${A", "x${", "${UNSET:-${A}", "${}", "${A B}", "${A-b}", "${1A}"}) {
        EXPECT_THROW(ferry::conf::expand_env(bad, env), std::invalid_argument) << bad;
    }
}

TEST(ConfEnv, UnterminatedNamesKeyAndLine)
{
    const std::string e = error_of(minimal + "http:\n  address: \"${HOST:8080\"\n");
    EXPECT_TRUE(contains(e, ".rr.yaml:5:12: http.address: \"${HOST:8080\": unterminated")) << e;

    const std::string in_list = error_of("version: '3'\nserver:\n  command: [php, \"${X\"]\n");
    EXPECT_TRUE(contains(in_list, ".rr.yaml:3:18: server.command[1]:")) << in_list;
}

// ---- errors --------------------------------------------------------------------------------------

struct ErrorCase {
    std::string yaml;
    std::vector<std::string> expected; // substrings of the message
};

TEST(ConfErrors, EachKindNamesFileLineKeyAndValue)
{
    const std::string h = minimal + "http:\n"; // "http:" is line 4
    const std::string p = h + "  pool:\n";     // "pool:" is line 5
    const std::vector<ErrorCase> cases{
        {"version: \"3\"\nserver:\n  command: php w.php\nhttp:\n  pool: {num_workers: many}\n",
         {".rr.yaml:5:23: http.pool.num_workers: \"many\" is not a valid value (expected a non-negative "
          "integer)"}},
        {p + "    num_workers: many\n",
         {".rr.yaml:6:18:", "http.pool.num_workers", "\"many\"", "expected a non-negative integer"}},
        {p + "    num_workers: -1\n", {".rr.yaml:6:18:", "http.pool.num_workers", "\"-1\""}},
        {p + "    num_workers: 4294967296\n", {":6:18:", "http.pool.num_workers", "out of range"}},
        {p + "    num_workers: [1, 2]\n", {":6:18:", "http.pool.num_workers: a list is not a valid value"}},
        {p + "    max_jobs: 1.5\n", {":6:15:", "http.pool.max_jobs", "\"1.5\""}},
        {p + "    max_jobs: 99999999999999999999999\n", {":6:15:", "http.pool.max_jobs", "out of range"}},
        {p + "    allocate_timeout: fast\n",
         {":6:23:", "http.pool.allocate_timeout", "\"fast\"", "duration"}},
        {p + "    destroy_timeout: -5s\n", {":6:22:", "http.pool.destroy_timeout", "\"-5s\"", "negative"}},
        {h + "  internal_error_code: 700\n", {":5:24:", "http.internal_error_code", "\"700\"", "400 to 599"}},
        {h + "  internal_error_code: abc\n", {":5:24:", "http.internal_error_code", "\"abc\""}},
        {h + "  address: localhost\n", {":5:12:", "http.address", "\"localhost\"", "host:port"}},
        {h + "  address: \"127.0.0.1:70000\"\n", {":5:12:", "http.address", "\"127.0.0.1:70000\"", "65535"}},
        {h + "  address: \"127.0.0.1:http\"\n", {":5:12:", "http.address", "\"127.0.0.1:http\""}},
        {h + "  address: \"::1:80\"\n", {":5:12:", "http.address", "brackets"}},
        {h + "  max_request_size: 10XB\n",
         {":5:21:", "http.max_request_size", "\"10XB\"", "unknown size unit"}},
        {h + "  max_request_size: 0\n", {":5:21:", "http.max_request_size", "\"0\"", "out of range"}},
        {h + "  max_request_size: 99999999999999GB\n", {":5:21:", "http.max_request_size", "too large"}},
        {h + "  limits:\n    max_header_size: 0\n", {":6:22:", "http.limits.max_header_size", "\"0\""}},
        {h + "  limits:\n    max_pipelined: 0\n",
         {":6:20:", "http.limits.max_pipelined", "\"0\"", "positive"}},
        {h + "  timeouts:\n    idle: 10 sec\n", {":6:11:", "http.timeouts.idle", "\"10 sec\""}},
        {h + "  timeouts:\n    write: \n", {":6:", "http.timeouts.write: no value given"}},
        {h + "  pool:\n    - num_workers: 1\n",
         {":6:5:", "http.pool: a list is not valid here (expected a map)"}},
        {h + "  pool: 4\n", {":5:9:", "http.pool: \"4\" is not valid here"}},
        {minimal + "http: [a]\n", {":4:7:", "http: a list is not valid here"}},
        {minimal + "  env: [A=1]\n", {":4:8:", "server.env: a list is not valid here"}},
        {minimal + "  env:\n    A: [1]\n", {":5:8:", "server.env.A: a list is not a valid value"}},
        {minimal + "  relay: tcp://127.0.0.1:7000\n",
         {":4:10:", "server.relay", "\"tcp://127.0.0.1:7000\"", "only \"pipes\" is supported"}},
        {"version: \"2\"\nserver:\n  command: php w.php\n", {":1:10:", "version", "\"2\"", "\"3\""}},
        {"- a\n- b\n", {".rr.yaml:1:1:", "a list is not valid here (expected a map of keys)"}},
        {minimal + "http:\n  address: :1\n  address: :2\n",
         {":6:3:", "http.address: duplicate key", "line 5"}},
    };
    for (const ErrorCase &c : cases) {
        const std::string e = error_of(c.yaml);
        for (const std::string &part : c.expected) {
            EXPECT_TRUE(contains(e, part)) << "message: " << e << "\nmissing: " << part << "\nyaml:\n"
                                           << c.yaml;
        }
    }
}

TEST(ConfErrors, ExpandedValueShowsBoth)
{
    const std::string e =
        error_of(minimal + "http:\n  pool:\n    num_workers: ${W}\n", {}, fake_env({{"W", "lots"}}));
    EXPECT_TRUE(contains(e, ".rr.yaml:6:18: http.pool.num_workers: \"lots\" (expanded from \"${W}\")")) << e;
}

TEST(ConfErrors, YamlSyntaxErrorLine)
{
    const std::string e =
        error_of("version: \"3\"\nserver:\n  command: php w.php\nhttp:\n  address: [1, 2\n");
    EXPECT_TRUE(contains(e, ".rr.yaml:")) << e;
    EXPECT_TRUE(contains(e, "YAML syntax error")) << e;
    EXPECT_TRUE(contains(e, ".rr.yaml:6:")) << e; // the flow list is still open at the end of line 5

    const std::string tab = error_of("version: \"3\"\nserver:\n\tcommand: php\n");
    EXPECT_TRUE(contains(tab, ".rr.yaml:3:")) << tab;

    const std::string map = error_of("version: \"3\"\nserver:\n  command: php: w.php\n");
    EXPECT_TRUE(contains(map, ".rr.yaml:3:") && contains(map, "YAML syntax error")) << map;
}

// ---- warnings -----------------------------------------------------------------------------------

TEST(ConfWarnings, UnknownKeyWithLineAndPath)
{
    const LoadResult r = load(minimal + "http:\n  pool:\n    num_wrokers: 4\n    bogus: 1\nextra: 1\n");
    ASSERT_EQ(r.warnings.size(), 3u);
    EXPECT_TRUE(contains(r.warnings[0], ".rr.yaml:6:5: unknown key \"http.pool.num_wrokers\" (ignored)"))
        << r.warnings[0];
    EXPECT_TRUE(contains(r.warnings[0], "did you mean \"http.pool.num_workers\"")) << r.warnings[0];
    EXPECT_TRUE(contains(r.warnings[1], ".rr.yaml:7:5: unknown key \"http.pool.bogus\" (ignored)"))
        << r.warnings[1];
    EXPECT_FALSE(contains(r.warnings[1], "did you mean")) << r.warnings[1];
    EXPECT_TRUE(contains(r.warnings[2], ".rr.yaml:8:1: unknown key \"extra\"")) << r.warnings[2];
    EXPECT_EQ(r.config.http.pool.num_workers, cpus()); // the misspelt key is ignored
}

TEST(ConfWarnings, RecognisedButUnsupported)
{
    const std::string yaml = minimal + R"(rpc:
  listen: tcp://127.0.0.1:6001
logs:
  level: debug
http:
  middleware: [static, gzip]
  static:
    dir: public
  pool:
    supervisor:
      max_worker_memory: 128
    debug: true
)";
    const LoadResult r = load(yaml);
    ASSERT_EQ(r.warnings.size(), 6u);
    const std::vector<std::pair<std::string, std::string>> expected{
        {".rr.yaml:4:1:", "\"rpc\""},
        {".rr.yaml:6:1:", "\"logs\""},
        {".rr.yaml:9:3:", "\"http.middleware\""},
        {".rr.yaml:10:3:", "\"http.static\""},
        {".rr.yaml:14:7:", "\"http.pool.supervisor.max_worker_memory\""},
        {".rr.yaml:15:5:", "\"http.pool.debug\""},
    };
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(contains(r.warnings[i], expected[i].first)) << r.warnings[i];
        EXPECT_TRUE(contains(r.warnings[i], expected[i].second)) << r.warnings[i];
        EXPECT_TRUE(contains(r.warnings[i], "recognised but not supported yet; ignored")) << r.warnings[i];
    }
}

// ---- overrides ----------------------------------------------------------------------------------

TEST(ConfOverrides, ExistingAndNewKeys)
{
    const LoadResult r = load(minimal + "http:\n  pool:\n    num_workers: 2\n",
                              {"http.pool.num_workers=4", "http.pool.max_jobs=10", "http.timeouts.idle=5s",
                               "server.command=php other.php", "server.env.app_env=${STAGE:-test}"},
                              fake_env());
    EXPECT_TRUE(r.warnings.empty());
    EXPECT_EQ(r.config.http.pool.num_workers, 4u);
    EXPECT_EQ(r.config.http.pool.max_jobs, 10u);
    EXPECT_EQ(r.config.http.idle_timeout, 5s);
    EXPECT_EQ(r.config.server.command, (std::vector<std::string>{"php", "other.php"}));
    const std::vector<std::pair<std::string, std::string>> env{{"APP_ENV", "test"}};
    EXPECT_EQ(r.config.server.env, env);
}

TEST(ConfOverrides, QuotedAndListValues)
{
    const LoadResult r = load("version: '3'\n", {"server.command=\"php w.php\"", "http.address=':9000'"});
    EXPECT_EQ(r.config.server.command, (std::vector<std::string>{"php", "w.php"}));
    EXPECT_EQ(r.config.http.address, "0.0.0.0:9000");
    const LoadResult list = load("", {"server.command=[php, \"a b.php\"]", "version=3"});
    EXPECT_EQ(list.config.server.command, (std::vector<std::string>{"php", "a b.php"}));
    EXPECT_TRUE(list.warnings.empty());
    // An override with "=" in its value splits at the first "=".
    const LoadResult eq = load(minimal, {"server.env.OPTS=a=b"});
    EXPECT_EQ(eq.config.server.env.at(0).second, "a=b");
}

TEST(ConfOverrides, ReplacesScalarSectionOnlyWhenNull)
{
    EXPECT_EQ(load(minimal + "http:\n", {"http.pool.num_workers=3"}).config.http.pool.num_workers, 3u);
    try {
        load(minimal + "http: nope\n", {"http.pool.num_workers=3"});
        FAIL() << "no error";
    } catch (const ConfigError &e) {
        EXPECT_TRUE(contains(e.what(), "http.pool.num_workers=3")) << e.what();
        EXPECT_TRUE(contains(e.what(), ".rr.yaml:4:7")) << e.what();
    }
}

TEST(ConfOverrides, Malformed)
{
    for (const std::string bad :
         {"http.pool.num_workers", "=4", " =4", "http..pool=1", "http.pool.=1", ".x=1"}) {
        try {
            load(minimal, {bad});
            ADD_FAILURE() << "no error for " << bad;
        } catch (const ConfigError &e) {
            EXPECT_TRUE(contains(e.what(), "invalid override \"" + bad + "\"")) << e.what();
        }
    }
    try {
        load(minimal, {"server.command=[php"});
        ADD_FAILURE() << "no error";
    } catch (const ConfigError &e) {
        EXPECT_TRUE(contains(e.what(), "invalid override \"server.command=[php\"")) << e.what();
    }
}

TEST(ConfOverrides, ErrorsSayFromOverride)
{
    const std::string e =
        error_of(minimal + "http:\n  pool:\n    num_workers: 2\n", {"http.pool.num_workers=many"});
    EXPECT_TRUE(contains(e, "(from -o): http.pool.num_workers: \"many\" is not a valid value")) << e;
    EXPECT_FALSE(contains(e, ":6:")) << e;

    const std::string created = error_of(minimal, {"http.timeouts.idle=soon"});
    EXPECT_TRUE(contains(created, "(from -o): http.timeouts.idle: \"soon\"")) << created;

    const LoadResult r = load(minimal, {"http.pool.num_wrokers=4"});
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "(from -o): unknown key \"http.pool.num_wrokers\"")) << r.warnings[0];

    const LoadResult top = load(minimal, {"foo.bar=1"});
    ASSERT_EQ(top.warnings.size(), 1u);
    EXPECT_TRUE(contains(top.warnings[0], "(from -o): unknown key \"foo\"")) << top.warnings[0];
}

// ---- durations ----------------------------------------------------------------------------------

TEST(ConfDuration, Valid)
{
    const std::vector<std::pair<std::string, Duration>> cases{
        {"60s", 60s},
        {"500ms", 500ms},
        {"1m", 60s},
        {"1h", 3600s},
        {"1m30s", 90s},
        {"1.5s", 1500ms},
        {"60", 60s},
        {"0", 0ms},
        {"0s", 0ms},
        {"2h45m", 9900s},
        {"1h1m1s1ms", 3661001ms},
        {".5s", 500ms},
        {"1.s", 1s},
        {"+3s", 3s},
        {"1500us", 2ms},
        {"1000000ns", 1ms},
        {"1ns", 1ms},
        {"250\xC2\xB5s", 1ms},
        {"0.001s", 1ms},
        {"1.25m", 75s},
    };
    for (const auto &[text, expected] : cases) {
        EXPECT_EQ(ferry::conf::parse_duration(text), expected) << text;
    }
}

TEST(ConfDuration, Invalid)
{
    for (const std::string bad :
         {"", "-1s", "-1", "s", "1x", "1sec", "1 s", " 1s", "1s ", "fast", "1.5", "1..5s", "1S", "++1s", ".s",
          "99999999999h", "9999999999999", "1e3s", "0x10s"}) {
        EXPECT_THROW(ferry::conf::parse_duration(bad), std::invalid_argument) << '"' << bad << '"';
    }
}

// ---- dump ---------------------------------------------------------------------------------------

TEST(ConfDump, RoundTrip)
{
    for (const std::string &yaml :
         {full, minimal,
          std::string(
              "version: '2.7'\nserver:\n  command: [php, \"a b.php\", \"it's \\\"q\\\"\", \"#x\", \"\"]\n"
              "  env: {A: '', B: 'null', C: \"~\", D: 'x: y', E: \"line\\nbreak\", F: 'true', G: '07'}\n"
              "http:\n  address: '[::1]:0'\n  max_request_size: 1536KB\n  timeouts: {idle: 1m30s, write: "
              "1.25s}\n")}) {
        const Config original = load(yaml).config;
        const std::string text = ferry::conf::dump(original);
        LoadResult again;
        ASSERT_NO_THROW(again = load_string(text, "dumped", {}, fake_env())) << text;
        EXPECT_TRUE(again.warnings.empty()) << text;
        EXPECT_EQ(again.config.source, "dumped");
        again.config.source = original.source;
        EXPECT_EQ(again.config, original) << text;
    }
}

TEST(ConfDump, ShowsEveryKey)
{
    const std::string text = ferry::conf::dump(load(full).config);
    for (const std::string key :
         {"version: \"3\"", "command:", "\"memory_limit=256M\"", "APP_ENV", "relay: \"pipes\"",
          "address: \"0.0.0.0:9000\"", "max_request_size: 16777216B", "internal_error_code: 502",
          "max_header_size: 32768", "max_pipelined: 4", "read_header: 5s", "read_body: 90s", "write: 120s",
          "idle: 500ms", "num_workers: 3", "max_jobs: 1000", "allocate_timeout: 1500ms",
          "destroy_timeout: 3600s"}) {
        EXPECT_TRUE(contains(text, key)) << "missing " << key << " in\n" << text;
    }
}

// ---- files --------------------------------------------------------------------------------------

class ConfFile : public ::testing::Test {
protected:
    void SetUp() override
    {
        dir_ = std::filesystem::temp_directory_path() / ("ferry_conf_test_" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string write(const std::string &name, const std::string &content)
    {
        const std::filesystem::path path = dir_ / name;
        std::ofstream(path) << content;
        return path.string();
    }

    std::filesystem::path dir_;
};

TEST_F(ConfFile, LoadsAndRecordsSource)
{
    const std::string path = write(".rr.yaml", full);
    const LoadResult r = load_file(path, {"http.pool.num_workers=5"}, fake_env());
    EXPECT_EQ(r.config.source, path);
    EXPECT_EQ(r.config.http.pool.num_workers, 5u);
    EXPECT_EQ(r.config.http.address, "0.0.0.0:9000");
}

TEST_F(ConfFile, MissingFile)
{
    const std::string path = (dir_ / "nope.yaml").string();
    try {
        load_file(path, {}, fake_env());
        FAIL() << "no error";
    } catch (const ConfigError &e) {
        EXPECT_TRUE(contains(e.what(), path)) << e.what();
        EXPECT_TRUE(contains(e.what(), std::strerror(ENOENT))) << e.what();
    }
}

TEST_F(ConfFile, DirectoryIsAnError)
{
    try {
        load_file(dir_.string(), {}, fake_env());
        FAIL() << "no error";
    } catch (const ConfigError &e) {
        EXPECT_TRUE(contains(e.what(), std::strerror(EISDIR))) << e.what();
    }
}

TEST_F(ConfFile, SyntaxErrorNamesFileAndLine)
{
    const std::string path =
        write("bad.yaml", "version: \"3\"\nserver:\n  command: php w.php\n  env: {A: 1\n");
    try {
        load_file(path, {}, fake_env());
        FAIL() << "no error";
    } catch (const ConfigError &e) {
        EXPECT_TRUE(contains(e.what(), path + ":5:")) << e.what();
    }
}

TEST_F(ConfFile, ErrorNamesFile)
{
    const std::string path = write("w.yaml", minimal + "http:\n  pool:\n    num_workers: many\n");
    try {
        load_file(path, {}, fake_env());
        FAIL() << "no error";
    } catch (const ConfigError &e) {
        EXPECT_EQ(std::string(e.what()), path + ":6:18: http.pool.num_workers: \"many\" is not a valid value "
                                                "(expected a non-negative integer)");
    }
}

TEST(ConfProcessEnv, ReadsTheEnvironment)
{
    ::setenv("FERRY_CONF_TEST_VAR", "42", 1);
    ::unsetenv("FERRY_CONF_TEST_UNSET");
    const EnvLookup env = ferry::conf::process_env();
    EXPECT_EQ(env("FERRY_CONF_TEST_VAR"), std::optional<std::string>("42"));
    EXPECT_EQ(env("FERRY_CONF_TEST_UNSET"), std::nullopt);
    EXPECT_EQ(ferry::conf::expand_env("${FERRY_CONF_TEST_VAR}", env), "42");
}
