// Loading: every key, the defaults, the value forms; server.command and server.env.
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

using namespace conf_test;

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
    EXPECT_EQ(c.http.address.to_string(), "0.0.0.0:9000");
    EXPECT_EQ(c.http.address.host, "0.0.0.0");
    EXPECT_EQ(c.http.address.port, 9000u);
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
    EXPECT_EQ(c.http.pool.client_gone_ttl, 3s);
    EXPECT_EQ(c.http.pool.exec_warn, 10s);
    EXPECT_EQ(c.http.pool.watch_tick, 250ms);
    EXPECT_EQ(c.http.pool.ttl, 3600s);
    EXPECT_EQ(c.http.pool.idle_ttl, 30s);
    EXPECT_EQ(c.http.pool.max_worker_memory, 256u << 20) << "a bare number is megabytes, as in RoadRunner";
    EXPECT_TRUE(c.http.pool.debug);
    const auto &st = c.http.static_files;
    EXPECT_TRUE(st.enabled);
    EXPECT_EQ(c.http.middleware, (std::vector<std::string>{"static", "proxy_ip_parser"}));
    EXPECT_EQ(st.dir, "public");
    EXPECT_EQ(st.forbid, (std::vector<std::string>{".php", ".htaccess"})) << "dotted and lower-cased";
    EXPECT_EQ(st.allow, (std::vector<std::string>{".css", ".js"}));
    EXPECT_TRUE(st.calculate_etag);
    EXPECT_TRUE(st.weak);
    const std::vector<std::pair<std::string, std::string>> req{{"X-Req", "a"}};
    const std::vector<std::pair<std::string, std::string>> resp{{"X-Frame-Options", "DENY"},
                                                                {"Cache-Tag", "assets, v2"}};
    EXPECT_EQ(st.request, req);
    EXPECT_EQ(st.response, resp) << "header names keep their case";
    EXPECT_EQ(st.index, (std::vector<std::string>{"index.htm", "default.html"}));
    EXPECT_TRUE(st.precompressed);
    EXPECT_EQ(st.cache_control, "public, max-age=60");
    EXPECT_EQ(st.on_forbidden, ferry::conf::StaticFallback::status);
    EXPECT_EQ(st.on_missing, ferry::conf::StaticFallback::status);
    EXPECT_TRUE(st.follow_symlinks);
    EXPECT_EQ(st.max_open_files, 77u);
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
    EXPECT_FALSE(c.http.static_files.enabled);
    EXPECT_FALSE(c.http.sendfile);
    EXPECT_EQ(c.http.static_files.index, (std::vector<std::string>{"index.html"}));
    EXPECT_EQ(c.http.address.to_string(), "127.0.0.1:8080");
    EXPECT_EQ(c.http.address.host, "127.0.0.1");
    EXPECT_EQ(c.http.address.port, 8080u);
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
    // Issue 41 item 8: a hung worker is never a permanent 503 under defaults.
    EXPECT_EQ(c.http.pool.exec_ttl, 60s);
    EXPECT_EQ(c.http.pool.client_gone_ttl, 10s);
}

TEST(ConfLoad, EmptySectionsKeepDefaults)
{
    const LoadResult r = load(minimal + "http:\n  pool:\n  limits:\n");
    EXPECT_TRUE(r.warnings.empty());
    EXPECT_EQ(r.config.http.address.to_string(), "127.0.0.1:8080");
    EXPECT_EQ(r.config.http.pool.num_workers, cpus());
}

TEST(ConfLoad, ControlListenersFirstByteTimeout)
{
    // Ferry's own: 5 s by default on the three control listeners, each set on its own.
    const Config d = load(minimal + "rpc:\n  listen: tcp://127.0.0.1:6001\nstatus: {}\nmetrics: {}\n").config;
    EXPECT_EQ(d.rpc.first_byte_timeout, 5s);
    EXPECT_EQ(d.status.first_byte_timeout, 5s);
    EXPECT_EQ(d.metrics.first_byte_timeout, 5s);
    const Config c = load(minimal + "rpc:\n  first_byte_timeout: 2s\nstatus:\n  first_byte_timeout: 300ms\n"
                                    "metrics:\n  first_byte_timeout: 1m\n")
                         .config;
    EXPECT_EQ(c.rpc.first_byte_timeout, 2s);
    EXPECT_EQ(c.status.first_byte_timeout, 300ms);
    EXPECT_EQ(c.metrics.first_byte_timeout, 60s);
    // and back through the dump
    EXPECT_EQ(load(ferry::conf::dump(c)).config.status.first_byte_timeout, 300ms);
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
    EXPECT_EQ(address(":8080").to_string(), "0.0.0.0:8080");
    EXPECT_EQ(address("localhost:0").to_string(), "localhost:0");
    EXPECT_EQ(address("[::1]:65535").to_string(), "[::1]:65535");
    EXPECT_EQ(address("127.0.0.1:80").to_string(), "127.0.0.1:80");
    // Resolved: the host as the resolver takes it (IPv6 without brackets), the port as a number.
    EXPECT_EQ(address(":8080"), (ferry::conf::Address{"0.0.0.0", 8080}));
    EXPECT_EQ(address("localhost:0"), (ferry::conf::Address{"localhost", 0}));
    EXPECT_EQ(address("[::1]:65535"), (ferry::conf::Address{"::1", 65535}));
    EXPECT_EQ(address("127.0.0.1:080"), (ferry::conf::Address{"127.0.0.1", 80}));
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
    EXPECT_EQ(header("8192B"), 8192u);
    EXPECT_EQ(header("2"), 2u << 20); // a bare number is megabytes in every size key
    EXPECT_EQ(header("64KB"), 65536u);
    EXPECT_EQ(header("1MB"), 1u << 20);
    const auto rate = [](const std::string &value) {
        return load(minimal + "http:\n  limits:\n    min_body_rate: " + value + "\n")
            .config.http.min_body_rate;
    };
    EXPECT_EQ(load(minimal).config.http.min_body_rate, 1024u);
    EXPECT_EQ(rate("2KB"), 2048u);
    EXPECT_EQ(rate("0"), 0u); // no minimum
}

TEST(ConfLoad, WebsocketBudgetsAndMessageTimeout)
{
    const Config d = load(minimal + "websockets: {}\n").config;
    EXPECT_EQ(d.websockets.max_assembly_memory, 64u << 20);
    EXPECT_EQ(d.websockets.max_send_queue_memory, 128u << 20);
    EXPECT_EQ(d.websockets.message_timeout, std::chrono::seconds(30));
    const Config c = load(minimal + "websockets:\n  max_assembly_memory: 32MB\n  max_send_queue_memory: 0\n"
                                    "  message_timeout: 1500ms\n")
                         .config;
    EXPECT_EQ(c.websockets.max_assembly_memory, 32u << 20);
    EXPECT_EQ(c.websockets.max_send_queue_memory, 0u); // no limit
    EXPECT_EQ(c.websockets.message_timeout, std::chrono::milliseconds(1500));
    // A bare number is megabytes, as for every size key; a bad value names the key and its line.
    EXPECT_EQ(
        load(minimal + "websockets:\n  max_assembly_memory: 48\n").config.websockets.max_assembly_memory,
        48ull << 20);
    const std::string e =
        error_of("websockets:\n  max_send_queue_memory: lots\n", {"server.command=php w.php"});
    EXPECT_TRUE(contains(e, ".rr.yaml:2:")) << e;
    EXPECT_TRUE(contains(e, "websockets.max_send_queue_memory")) << e;
    const std::string t = error_of("websockets:\n  message_timeout: soon\n", {"server.command=php w.php"});
    EXPECT_TRUE(contains(t, ".rr.yaml:2:")) << t;
    EXPECT_TRUE(contains(t, "websockets.message_timeout")) << t;
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
                              {}, fake_env({{"DB_HOST", "db.local"}, {"HOME", "/home/app"}}));
    const std::vector<std::pair<std::string, std::string>> env{
        {"DB_HOST", "db.local"}, {"PORT", "5432"}, {"EMPTY", ""}, {"NOTHING", ""}, {"LITERAL", "/home/app"}};
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

TEST(ConfEnv, DuplicateHeaderInAnyCaseWarnsAndKeepsItsPlace)
{
    const LoadResult r =
        load(minimal + "http:\n  static:\n    response:\n      X-A: 1\n      X-B: 2\n      x-a: 3\n");
    const std::vector<std::pair<std::string, std::string>> headers{{"X-A", "3"}, {"X-B", "2"}};
    EXPECT_EQ(r.config.http.static_files.response, headers);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], ".rr.yaml:9:7:")) << r.warnings[0];
    EXPECT_TRUE(contains(r.warnings[0], "header \"x-a\" is set twice")) << r.warnings[0];
}

// Each name was searched for among those before it: 70 s for the 290,000 names a 4 MiB file holds.
TEST(ConfEnv, ManyNamesReadInOrder)
{
    std::string yaml = minimal + "  env:\n";
    for (int i = 0; i < 100000; ++i) {
        yaml += "    v" + std::to_string(i) + ": " + std::to_string(i) + "\n";
    }
    yaml += "    V7: last\n";
    const auto start = std::chrono::steady_clock::now();
    const LoadResult r = load(yaml);
    // About 20 s with the search (quadratic), 0.7 s without, on this 2-CPU VM.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    ASSERT_EQ(r.config.server.env.size(), 100000u);
    EXPECT_EQ(r.config.server.env[7], (std::pair<std::string, std::string>{"V7", "last"}));
    EXPECT_EQ(r.config.server.env[99999], (std::pair<std::string, std::string>{"V99999", "99999"}));
    EXPECT_EQ(r.warnings.size(), 1u);
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
    EXPECT_EQ(r.config.http.address.to_string(), "127.0.0.1:8181");
    EXPECT_EQ(r.config.http.pool.num_workers, 2u);
    EXPECT_EQ(r.config.http.pool.allocate_timeout, 3s);

    const LoadResult set = load(yaml, {}, fake_env({{"PORT", "1"}, {"WORKERS", "9"}, {"MODE", "dev"}}));
    EXPECT_EQ(set.config.http.pool.num_workers, 9u);
    EXPECT_EQ(set.config.server.command.back(), "--mode=dev");
}

TEST(ConfEnv, ExpandEnvFunction)
{
    const EnvLookup env = fake_env({{"A", "x"}, {"EMPTY", ""}, {"B", "${A}"}, {"A_B1", "y"}});
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
        {"${B}", "${A}"},            // values are not expanded again
        {"$A $ {A} }", "x $ {A} }"}, // $NAME as RoadRunner reads it
        {"$A_B1-z", "y-z"},          // the longest name
        {"$UNSET.", "."},
        {"cost $5, $$ and a$", "cost $5, $$ and a$"}, // no name after "$": as written
        {"$B", "${A}"},
        {"", ""},
    };
    for (const Case &c : cases) {
        const auto expanded = ferry::conf::expand_env(c.in, env);
        ASSERT_TRUE(expanded) << c.in << ": " << expanded.error().message;
        EXPECT_EQ(*expanded, c.out) << c.in;
    }
    for (const std::string bad : {"${A", "x${", "${UNSET:-${A}", "${}", "${A B}", "${A-b}", "${1A}"}) {
        EXPECT_FALSE(ferry::conf::expand_env(bad, env)) << bad;
    }
}

TEST(ConfEnv, UnterminatedNamesKeyAndLine)
{
    const std::string e = error_of(minimal + "http:\n  address: \"${HOST:8080\"\n");
    EXPECT_TRUE(contains(e, ".rr.yaml:5:12: http.address: \"${HOST:8080\": unterminated")) << e;

    const std::string in_list = error_of("version: '3'\nserver:\n  command: [php, \"${X\"]\n");
    EXPECT_TRUE(contains(in_list, ".rr.yaml:3:18: server.command[1]:")) << in_list;
}

// A duration without a unit: Ferry reads seconds, RoadRunner (Go) nanoseconds; the warning says which was
// taken.
TEST(ConfDurations, ABareNumberIsSecondsWithAWarningNamingTheKey)
{
    const LoadResult r = load(minimal + "http:\n  pool:\n    allocate_timeout: 60\n    destroy_timeout: 0\n"
                                        "    reset_timeout: 5s\n");
    EXPECT_EQ(r.config.http.pool.allocate_timeout, std::chrono::seconds(60));
    ASSERT_EQ(r.warnings.size(), 1u) << r.warnings.front(); // "0" is 0 in any unit; "5s" has its unit
    EXPECT_TRUE(contains(r.warnings[0], ":6:23: http.pool.allocate_timeout \"60\" has no unit: taken as 60s "
                                        "(RoadRunner would read nanoseconds)"))
        << r.warnings[0];
}

// RoadRunner's reference config writes server.env as a list of one-entry maps; both forms read alike.
TEST(ConfEnv, TheListFormOfRoadRunnersReferenceConfig)
{
    const LoadResult r =
        load(minimal + "  env:\n    - some_key: \"v1\"\n    - KEY2: ${DB_HOST}\n      key3: x\n", {},
             fake_env({{"DB_HOST", "db.local"}}));
    const std::vector<std::pair<std::string, std::string>> env{
        {"SOME_KEY", "v1"}, {"KEY2", "db.local"}, {"KEY3", "x"}};
    EXPECT_EQ(r.config.server.env, env);
    EXPECT_TRUE(r.warnings.empty());
    const std::string e = error_of(minimal + "  env:\n    - A: 1\n    - [x]\n");
    EXPECT_TRUE(contains(e, "server.env: a list is not valid here")) << e; // a list of maps only
}
