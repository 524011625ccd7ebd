// Config errors (file:line:col: key.path: value ... (expected ...)) and warnings (unknown, unsupported keys).
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace conf_test;

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
        {"version: \"3\"\nserver:\n  command: php w.php\nhttp:\n  io_threads: 2000\n",
         {".rr.yaml:5:15:", "http.io_threads", "\"2000\"", "0 (one per two CPUs) to 1024"}},
        {"version: \"3\"\nserver:\n  command: php w.php\nhttp:\n  accept: kernel\n",
         {".rr.yaml:5:11:", "http.accept", "\"kernel\"", "expected \"handoff\" or \"reuseport\""}},
        {p + "    num_workers: [1, 2]\n", {":6:18:", "http.pool.num_workers: a list is not a valid value"}},
        {p + "    max_jobs: 1.5\n", {":6:15:", "http.pool.max_jobs", "\"1.5\""}},
        {p + "    recycle_priority: low\n",
         {".rr.yaml:6:23:", "http.pool.recycle_priority", "\"low\"",
          "expected \"auto\", \"idle\" or \"normal\""}},
        {p + "    cpu_affinity: on\n",
         {".rr.yaml:6:19:", "http.pool.cpu_affinity", "\"on\"", "expected \"auto\" or \"off\""}},
        {p + "    cpu_affinity: [0, 1]\n", {":6:19:", "http.pool.cpu_affinity: a list is not a valid value"}},
        {p + "    fork: sometimes\n",
         {".rr.yaml:6:11:", "http.pool.fork", "\"sometimes\"", "expected true, false or \"php\""}},
        {p + "    fork_fast_exit: sometimes\n",
         {".rr.yaml:6:21:", "http.pool.fork_fast_exit", "\"sometimes\"", "true or false"}},
        {p + "    recycle_priority: [idle]\n",
         {":6:23:", "http.pool.recycle_priority: a list is not a valid value"}},
        {p + "    max_jobs: 99999999999999999999999\n", {":6:15:", "http.pool.max_jobs", "out of range"}},
        {p + "    allocate_timeout: fast\n",
         {":6:23:", "http.pool.allocate_timeout", "\"fast\"", "duration"}},
        {p + "    destroy_timeout: -5s\n", {":6:22:", "http.pool.destroy_timeout", "\"-5s\"", "negative"}},
        {p + "    supervisor:\n      watch_tick: 0s\n",
         {":7:19:", "http.pool.supervisor.watch_tick", "\"0s\"", "longer than 0"}},
        {p + "    supervisor:\n      max_worker_memory: lots\n",
         {":7:26:", "http.pool.supervisor.max_worker_memory", "\"lots\""}},
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
        {h + "  limits:\n    min_body_rate: slow\n",
         {":6:20:", "http.limits.min_body_rate", "\"slow\"", "bytes per second"}},
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
        {minimal + "rpc:\n  first_byte_timeout: 0s\n",
         {".rr.yaml:5:23:", "rpc.first_byte_timeout", "\"0s\"", "longer than 0"}},
        {minimal + "status:\n  first_byte_timeout: soon\n",
         {".rr.yaml:5:23:", "status.first_byte_timeout", "\"soon\"", "duration"}},
        {minimal + "metrics:\n  first_byte_timeout: 0\n",
         {".rr.yaml:5:23:", "metrics.first_byte_timeout", "longer than 0"}},
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
    const std::string yaml = minimal + R"(metrics:
  collect: {app_metric: {type: counter}}
logs:
  channels: {http: {level: debug}}
http:
  middleware: [static, headers, sendfile]
  static:
    dir: public
  pool:
    supervisor:
      max_worker_memory: 128
    stream_timeout: 60s
    dynamic_allocator: {max_workers: 10}
)";
    LoadResult r = load(yaml);
    // http.middleware and http.static are Ferry's too now (a middleware it lacks is named), and the
    // supervisor's limits.
    ASSERT_EQ(r.warnings.size(), 5u);
    EXPECT_TRUE(contains(r.warnings[2],
                         ".rr.yaml:9:15: http.middleware lists \"headers\", RoadRunner middleware "
                         "that Ferry does not have: ignored"))
        << r.warnings[2];
    r.warnings.erase(r.warnings.begin() + 2);
    const std::vector<std::pair<std::string, std::string>> expected{
        {".rr.yaml:5:3:", "\"metrics.collect\""},
        {".rr.yaml:7:3:", "\"logs.channels\""},
        {".rr.yaml:15:5:", "\"http.pool.stream_timeout\""},
        {".rr.yaml:16:5:", "\"http.pool.dynamic_allocator\""},
    };
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(contains(r.warnings[i], expected[i].first)) << r.warnings[i];
        EXPECT_TRUE(contains(r.warnings[i], expected[i].second)) << r.warnings[i];
        EXPECT_TRUE(contains(r.warnings[i], "recognised but not supported yet; ignored")) << r.warnings[i];
    }
    EXPECT_TRUE(r.config.http.static_files.enabled);
    EXPECT_TRUE(r.config.http.sendfile);
    EXPECT_EQ(r.config.http.static_files.dir, "public");
}

// status and metrics answer anyone who reaches them: ":2114" (0.0.0.0) is said, as the RPC listener refuses
// a non-loopback address without rpc.allow_remote.
TEST(ConfWarnings, StatusAndMetricsOnEveryInterface)
{
    const LoadResult r = load(minimal + "status:\n  address: \":2114\"\nmetrics:\n  address: '[::]:2112'\n");
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_EQ(r.warnings[0], ".rr.yaml:5:12: status.address \":2114\" listens on every interface (0.0.0.0), "
                             "reachable from other machines; write \"127.0.0.1:2114\" to keep it local");
    EXPECT_EQ(r.warnings[1], ".rr.yaml:7:12: metrics.address \"[::]:2112\" listens on every interface (::), "
                             "reachable from other machines; write \"[::1]:2112\" to keep it local");
    EXPECT_EQ(r.config.status.address, (ferry::conf::Address{"0.0.0.0", 2114})); // still listened on

    const LoadResult o = load(minimal, {"status.address=0.0.0.0:9", "metrics.address=${HOST}:9"},
                              fake_env({{"HOST", "0.0.0.0"}}));
    ASSERT_EQ(o.warnings.size(), 2u);
    EXPECT_EQ(o.warnings[0], "(from -o): status.address \"0.0.0.0:9\" listens on every interface (0.0.0.0), "
                             "reachable from other machines; write \"127.0.0.1:9\" to keep it local");
    EXPECT_TRUE(
        contains(o.warnings[1], "metrics.address \"0.0.0.0:9\" (expanded from \"${HOST}:9\") listens"))
        << o.warnings[1];

    for (const std::string address : {"127.0.0.1:2114", "localhost:2114", "[::1]:2114", "10.1.2.3:2114"}) {
        EXPECT_TRUE(load(minimal + "status:\n  address: '" + address + "'\n").warnings.empty()) << address;
    }
    // http.address on every interface is what a server is for: nothing said.
    EXPECT_TRUE(load(minimal + "http:\n  address: ':8080'\n").warnings.empty());
}

// ---- text that is not UTF-8 ---------------------------------------------------------------------

// A value or key that is not UTF-8 is refused, naming the key and the line (fuzz finding, config target:
// `metrics.address: 127\xbb0.0.1:2112` loaded, and `ferry config` dumped the byte as U+FFFD: a different
// config).
TEST(ConfErrors, TextThatIsNotUtf8)
{
    const std::vector<ErrorCase> cases{
        {minimal + "metrics:\n  address: 127\xbb"
                   "0.0.1:2112\n",
         {".rr.yaml:5:12: metrics.address: \"127\\xbb0.0.1:2112\" is not valid UTF-8 (byte 0xbb at offset "
          "3)"}},
        {minimal + "http:\n  address: \"a\xc3\"\n",
         {".rr.yaml:5:12: http.address:", "(byte 0xc3 at offset 1)"}},
        // Overlong, surrogate, above U+10FFFF.
        {minimal + "http:\n  address: a\xc0\x80\n", {":5:12: http.address:", "(byte 0xc0 at offset 1)"}},
        {minimal + "http:\n  address: \xed\xa0\x80x\n", {":5:12: http.address:", "(byte 0xed at offset 0)"}},
        {minimal + "http:\n  address: \xf4\x90\x80\x80\n",
         {":5:12: http.address:", "(byte 0xf4 at offset 0)"}},
        // In a list, a key, an environment variable's name and value, a header name.
        {minimal + "http:\n  middleware: [static, \"gz\xff\"]\n", {":5:24: http.middleware[1]:", "0xff"}},
        {minimal + "http:\n  addr\xe9ss: x\n",
         {".rr.yaml:5:3: http: the key \"addr\\xe9ss\" is not valid UTF-8 (byte 0xe9 at offset 4)"}},
        {minimal + "\xe9: 1\n", {".rr.yaml:4:1: the key \"\\xe9\" is not valid UTF-8"}},
        {minimal + "  env:\n    N\xe9: v\n",
         {".rr.yaml:5:5: server.env: the environment variable name \"N\\xe9\" is not valid UTF-8"}},
        {minimal + "  env:\n    N: \"v\xe9\"\n", {".rr.yaml:5:8: server.env.N:", "(byte 0xe9 at offset 1)"}},
        {minimal + "http:\n  static:\n    dir: .\n    response:\n      X-\xe9: v\n",
         {":8:7: http.static.response: the header name \"X-\\xe9\" is not valid UTF-8"}},
    };
    for (const auto &c : cases) {
        const std::string e = error_of(c.yaml);
        for (const auto &part : c.expected)
            EXPECT_TRUE(contains(e, part)) << "message: " << e << "\nmissing: " << part << "\nyaml:\n"
                                           << c.yaml;
    }
    // From the environment.
    const std::string env =
        error_of(minimal + "http:\n  address: ${A}\n", {}, fake_env({{"A", "127.0.0.1:8\xff"}}));
    EXPECT_TRUE(contains(env,
                         ".rr.yaml:5:12: http.address: \"127.0.0.1:8\\xff\" is not valid UTF-8 (byte 0xff "
                         "at offset 11) (expanded from \"${A}\")"))
        << env;
    // Well-formed UTF-8 (2, 3 and 4 bytes) loads and dumps back the same.
    const auto r = load(minimal + "  env:\n    CAFE: \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\xa2\"\n");
    const auto back = load(ferry::conf::dump(r.config));
    EXPECT_TRUE(back.config == r.config);
    ASSERT_FALSE(r.config.server.env.empty());
    EXPECT_EQ(r.config.server.env.back().second, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\xa2");
}

// http.compression: read with "gzip" in http.middleware; each bad value named with its line and what is
// expected.
TEST(ConfCompression, KeysAndTheirErrors)
{
    const std::string h = minimal + "http:\n  middleware: [gzip]\n  compression:\n";
    const LoadResult r =
        load(h + "    types: [Text/HTML, \"application/*\"]\n    min_length: 256\n"
                 "    gzip_level: 6\n    brotli_quality: 5\n    prefer: br\n    max_streams: 8\n");
    ASSERT_TRUE(r.warnings.empty()) << r.warnings[0];
    const auto &c = r.config.http.compression;
    EXPECT_TRUE(c.enabled);
    EXPECT_EQ(c.types, (std::vector<std::string>{"text/html", "application/*"})) << "lower-cased";
    EXPECT_EQ(c.min_length, 256u);
    EXPECT_EQ(c.gzip_level, 6);
    EXPECT_EQ(c.brotli_quality, 5);
    EXPECT_EQ(c.prefer, "br");
    EXPECT_EQ(c.max_streams, 8u);
    EXPECT_FALSE(load(minimal).config.http.compression.enabled) << "off without the middleware";

    const std::vector<ErrorCase> cases{
        {h + "    types: [json]\n", {":7:13:", "http.compression.types[0]", "\"json\" is not a media type"}},
        {h + "    types: [\"*/*\"]\n", {":7:13:", "\"*/*\" is not a media type"}},
        {h + "    gzip_level: 0\n", {":7:17:", "http.compression.gzip_level", "from 1 to 9"}},
        {h + "    gzip_level: 10\n", {":7:17:", "http.compression.gzip_level", "from 1 to 9"}},
        {h + "    brotli_quality: 12\n", {":7:21:", "http.compression.brotli_quality", "from 0 to 11"}},
        {h + "    prefer: zstd\n", {":7:13:", "http.compression.prefer", "\"zstd\"", "\"gzip\" or \"br\""}},
        {h + "    max_streams: 0\n", {":7:18:", "http.compression.max_streams"}},
    };
    for (const ErrorCase &e : cases) {
        const std::string message = error_of(e.yaml);
        for (const std::string &part : e.expected)
            EXPECT_TRUE(contains(message, part)) << message << "\n(expected to contain: " << part << ")";
    }
}

TEST(ConfBroker, KeysAndTheirErrors)
{
    const std::string w = minimal + "websockets:\n  broker:\n";
    LoadResult r =
        load(w + "    driver: redis\n    addrs: [\"10.0.0.5:6380\", \"redis.local:6379\"]\n"
                 "    prefix: \"app1:\"\n    password: pw\n    node: web-1\n    connect_timeout: 500ms\n");
    ASSERT_TRUE(r.warnings.empty()) << r.warnings[0];
    const auto &b = r.config.websockets.broker;
    EXPECT_TRUE(b.redis());
    ASSERT_EQ(b.servers.size(), 2u);
    EXPECT_EQ(b.servers[0].host, "10.0.0.5");
    EXPECT_EQ(b.servers[0].port, 6380);
    EXPECT_EQ(b.servers[1].host, "redis.local");
    EXPECT_EQ(b.prefix, "app1:");
    EXPECT_EQ(b.password, "pw");
    EXPECT_EQ(b.node, "web-1");
    EXPECT_EQ(b.connect_timeout, std::chrono::milliseconds(500));
    const auto defaults = load(minimal + "websockets:\n  path: /ws\n").config.websockets.broker;
    EXPECT_FALSE(defaults.redis()) << "memory by default";
    ASSERT_EQ(defaults.servers.size(), 1u);
    EXPECT_EQ(defaults.servers[0].port, 6379);

    // RoadRunner's form: a broker's name. Warned, ignored, the defaults kept.
    r = load(minimal + "websockets:\n  broker: default\n");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(
        contains(r.warnings[0], "\"websockets.broker\": \"default\" names a RoadRunner broadcast broker"))
        << r.warnings[0];
    EXPECT_FALSE(r.config.websockets.broker.redis());

    const std::vector<ErrorCase> cases{
        {w + "    driver: nats\n", {":6:13:", "websockets.broker.driver", "\"memory\" or \"redis\""}},
        {w + "    addrs: [\"localhost\"]\n", {":6:13:", "websockets.broker.addrs[0]", "\"host:port\""}},
        {w + "    addrs: [\"h:0\"]\n", {"websockets.broker.addrs[0]", "is not a valid address"}},
        {w + "    addrs: [\":6379\"]\n", {"websockets.broker.addrs[0]"}},
        {w + "    addrs: []\n", {"websockets.broker.addrs", "an empty list"}},
        {w + "    prefix: \"a b\"\n", {"websockets.broker.prefix", "no spaces"}},
        {w + "    node: \"web.1\"\n", {"websockets.broker.node", "letters, digits"}},
        {w + "    connect_timeout: 0s\n", {"websockets.broker.connect_timeout"}},
        {w + "    colour: red\n", {}},
    };
    for (std::size_t i = 0; i + 1 < cases.size(); ++i) {
        const std::string message = error_of(cases[i].yaml);
        for (const std::string &part : cases[i].expected)
            EXPECT_TRUE(contains(message, part)) << message << "\n(expected to contain: " << part << ")";
    }
    r = load(cases.back().yaml);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "unknown key \"websockets.broker.colour\"")) << r.warnings[0];
}
