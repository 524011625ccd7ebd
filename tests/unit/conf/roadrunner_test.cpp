// RoadRunner's configs: keys Ferry refuses rather than ignores, --strict, middleware names, a full reference
// config loaded with warnings for what Ferry lacks.
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace conf_test;

// http.ssl turns TLS on: its certificate and key are required (never plain HTTP where the file asks for TLS).
TEST(ConfRoadRunner, HttpSslNeedsItsCertificateAndKey)
{
    const std::string e = error_of(minimal + "http:\n  ssl:\n    address: :443\n    key: a.key\n");
    EXPECT_TRUE(contains(e, "http.ssl.cert")) << e;
    EXPECT_TRUE(contains(e, "the TLS certificate")) << e;
    const auto r = ferry::conf::load_string(
        minimal + "http:\n  ssl:\n    address: 127.0.0.1:8443\n    cert: a.crt\n    key: a.key\n"
                  "    client_auth_type: require_and_verify_client_cert\n    root_ca: ca.crt\n",
        ".rr.yaml", {}, fake_env({}));
    ASSERT_TRUE(r) << r.error().message;
    const auto &ssl = r->config.http.ssl;
    EXPECT_TRUE(ssl.enabled);
    EXPECT_EQ(ssl.address.port, 8443);
    EXPECT_EQ(ssl.cert, "a.crt");
    EXPECT_EQ(ssl.client_auth, ferry::conf::ClientAuth::require_and_verify);
    // http.ssl.certs: a list of maps, each read by its own table; errors name the item.
    const auto sni = ferry::conf::load_string(
        minimal + "http:\n  ssl:\n    cert: a.crt\n    key: a.key\n    certs:\n"
                  "      - {cert: b.crt, key: b.key, hosts: [b.example, \"*.b.example\"]}\n"
                  "      - cert: c.crt\n        key: c.key\n        hosts: c.example\n",
        ".rr.yaml", {}, fake_env({}));
    ASSERT_TRUE(sni) << sni.error().message;
    ASSERT_EQ(sni->config.http.ssl.certs.size(), 2u);
    EXPECT_EQ(sni->config.http.ssl.certs[0].hosts, (std::vector<std::string>{"b.example", "*.b.example"}));
    EXPECT_EQ(sni->config.http.ssl.certs[1].cert, "c.crt");
    EXPECT_TRUE(contains(ferry::conf::dump(sni->config), "hosts:\n"));
    const std::string missing_key = error_of(
        minimal +
        "http:\n  ssl:\n    cert: a.crt\n    key: a.key\n    certs:\n      - {cert: b.crt, hosts: [b]}\n");
    EXPECT_TRUE(contains(missing_key, "http.ssl.certs[0].key: missing")) << missing_key;
    const std::string bad_host =
        error_of(minimal + "http:\n  ssl:\n    cert: a.crt\n    key: a.key\n    certs:\n"
                           "      - {cert: b, key: b, hosts: [ok.example, \"a b\"]}\n");
    EXPECT_TRUE(contains(bad_host, "http.ssl.certs[0].hosts[1]")) << bad_host;
    EXPECT_TRUE(contains(bad_host, "is not a host name")) << bad_host;
    const std::string not_list =
        error_of(minimal + "http:\n  ssl:\n    cert: a.crt\n    key: a.key\n    certs: x\n");
    EXPECT_TRUE(contains(not_list, "http.ssl.certs: ")) << not_list;
    const std::string bad = error_of(minimal + "http:\n  ssl:\n    cert: a.crt\n    key: a.key\n"
                                               "    client_auth_type: verify\n");
    EXPECT_TRUE(contains(bad, "http.ssl.client_auth_type")) << bad;
    EXPECT_TRUE(contains(bad, "require_and_verify_client_cert")) << bad;
}

// What `--strict` turns into errors: unknown keys and unsupported RoadRunner keys, not other warnings.
TEST(ConfRoadRunner, StrictListsUnknownAndUnsupportedKeysOnly)
{
    const auto r = ferry::conf::load_string(
        minimal + "http:\n  adress: :8080\n  http3: {enabled: true}\n  timeouts:\n    idle: 30\nstatus:\n"
                  "  address: :2114\n",
        ".rr.yaml", {}, fake_env({}));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->warnings.size(), 4u); // the two keys, a duration without unit, every interface
    ASSERT_EQ(r->strict.size(), 2u);
    EXPECT_TRUE(
        contains(r->strict[0], ":5:3: unknown key \"http.adress\" (ignored); did you mean \"http.address\"?"))
        << r->strict[0];
    EXPECT_TRUE(contains(r->strict[1], "key \"http.http3\" is recognised but not supported yet"))
        << r->strict[1];
}

// http.middleware: RoadRunner's names that Ferry lacks and typos are one warning at the list, with "did you
// mean"; --strict refuses them (the file asks for something that would not be done).
TEST(ConfRoadRunner, MiddlewareFerryLacksOrMisspeltIsWarnedAndStrictRefusesIt)
{
    const auto r = ferry::conf::load_string(
        minimal + "http:\n  middleware: [static, headers, statc, proxy_ip_parser, sendfile, zorglub]\n",
        ".rr.yaml", {}, fake_env({}));
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_EQ(r->warnings.size(), 1u);
    EXPECT_EQ(r->warnings[0],
              ".rr.yaml:5:15: http.middleware lists \"headers\", RoadRunner middleware that Ferry does not "
              "have, and "
              "\"statc\" (did you mean \"static\"?), \"zorglub\", not middleware Ferry or RoadRunner knows: "
              "ignored "
              "(Ferry's are \"static\", \"sendfile\", \"gzip\" and \"proxy_ip_parser\")");
    EXPECT_EQ(r->strict, r->warnings);
    EXPECT_TRUE(r->config.http.static_files.enabled);
    EXPECT_TRUE(r->config.http.sendfile);
    EXPECT_FALSE(r->config.http.compression.enabled);

    const auto fine =
        ferry::conf::load_string(minimal + "http:\n  middleware: [static, sendfile, proxy_ip_parser, gzip]\n",
                                 ".rr.yaml", {}, fake_env({}));
    ASSERT_TRUE(fine) << fine.error().message;
    EXPECT_TRUE(fine->warnings.empty()) << fine->warnings[0];
    EXPECT_TRUE(fine->config.http.compression.enabled);
}

// A RoadRunner configuration with most of RoadRunner's plugins
// (tests/unit/conf/fixtures/roadrunner-full.yaml, written for these tests in the shapes of RoadRunner's
// reference config): it loads, what Ferry has reads as RoadRunner reads it, and what it lacks is a warning
// naming the key; --strict would refuse it.
TEST(ConfRoadRunner, AFullRoadRunnerConfigLoadsWithWarningsForWhatFerryLacks)
{
    const std::string path = std::string(FERRY_CONF_FIXTURES) + "/roadrunner-full.yaml";
    const auto r = ferry::conf::load_file(path, {}, fake_env({}));
    ASSERT_TRUE(r) << r.error().message;
    const ferry::conf::Config &c = r->config;
    EXPECT_EQ(c.server.command, (std::vector<std::string>{"php", "psr-worker.php"}));
    const std::vector<std::pair<std::string, std::string>> env{{"APP_ENV", "production"},
                                                               {"APP_DEBUG", "false"}};
    EXPECT_EQ(c.server.env, env);
    EXPECT_EQ(c.logs.output, "stderr");
    EXPECT_EQ(c.http.internal_error_code, 505u);
    EXPECT_EQ(c.http.pool.num_workers, 4u);
    EXPECT_EQ(c.http.pool.max_jobs, 64u);
    EXPECT_FALSE(c.http.h2c);
    EXPECT_EQ(c.http.max_concurrent_streams, 100u); // http.http2, read (no longer warned)
    EXPECT_EQ(c.http.pool.max_worker_memory, 128u << 20);
    EXPECT_EQ(c.http.static_files.forbid, (std::vector<std::string>{""}));
    EXPECT_TRUE(c.websockets.enabled);
    EXPECT_TRUE(c.status.enabled);
    EXPECT_TRUE(c.reload.enabled);
    auto warned = [&](const std::string &key) {
        return std::any_of(r->warnings.begin(), r->warnings.end(),
                           [&](const std::string &w) { return contains(w, "\"" + key + "\""); });
    };
    for (const char *key : {"server.on_init",
                            "server.relay_timeout",
                            "logs.channels",
                            "logs.file_logger_options",
                            "http.fcgi",
                            "http.headers",
                            "http.new_relic",
                            "metrics.collect",
                            "temporal",
                            "kv",
                            "service",
                            "redis",
                            "http_cache",
                            "otel",
                            "broadcast",
                            "nats",
                            "kafka",
                            "amqp",
                            "beanstalk",
                            "sqs",
                            "jobs",
                            "grpc",
                            "tcp",
                            "fileserver",
                            "endure",
                            "lock",
                            "centrifuge",
                            "websockets.broker"})
        EXPECT_TRUE(warned(key)) << key;
    for (const char *plugin :
         {"nats", "kafka", "amqp", "http_cache"}) // RoadRunner's: recognised, not "unknown"
        EXPECT_TRUE(std::any_of(r->warnings.begin(), r->warnings.end(), [&](const std::string &w) {
            return contains(w, "key \"" + std::string(plugin) + "\" is recognised but not supported");
        })) << plugin;
    EXPECT_FALSE(r->strict.empty()); // --strict refuses it
    // ... and the same file asking for TLS without a certificate is refused, with or without --strict
    const std::string tls =
        error_of("version: \"3\"\nserver:\n  command: php w.php\nhttp:\n  ssl:\n    address: :443\n");
    EXPECT_TRUE(contains(tls, "http.ssl.cert")) << tls;
}
