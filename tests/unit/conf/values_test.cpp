// Durations and addresses as functions, and the dump (`ferry config`) that loads back.
#include "conf_test_util.hpp"
#include "values.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace conf_test;

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
        const auto parsed = ferry::conf::parse_duration(text);
        ASSERT_TRUE(parsed) << text << ": " << parsed.error().message;
        EXPECT_EQ(*parsed, expected) << text;
    }
}

TEST(ConfDuration, Invalid)
{
    for (const std::string bad :
         {"", "-1s", "-1", "s", "1x", "1sec", "1 s", " 1s", "1s ", "fast", "1.5", "1..5s", "1S", "++1s", ".s",
          "99999999999h", "9999999999999", "1e3s", "0x10s"}) {
        EXPECT_FALSE(ferry::conf::parse_duration(bad)) << '"' << bad << '"';
    }
}

// ---- addresses ---------------------------------------------------------------------------------

TEST(ConfAddress, ResolvedIntoHostAndPort)
{
    using ferry::conf::Address;
    const std::vector<std::pair<std::string, Address>> cases{
        {":8080", {"0.0.0.0", 8080}}, // an empty host: every interface
        {"127.0.0.1:80", {"127.0.0.1", 80}},
        {"[::1]:8080", {"::1", 8080}}, // IPv6 in brackets, kept without them
        {"[::]:0", {"::", 0}},         // port 0: any free port
        {"localhost:65535", {"localhost", 65535}},
        {"127.0.0.1:080", {"127.0.0.1", 80}},
    };
    for (const auto &[text, expected] : cases) {
        const auto parsed = ferry::conf::detail::parse_address(text);
        ASSERT_TRUE(parsed) << text;
        EXPECT_EQ(*parsed, expected) << text;
    }
    EXPECT_EQ((Address{"0.0.0.0", 8080}).to_string(), "0.0.0.0:8080");
    EXPECT_EQ((Address{"::1", 8080}).to_string(), "[::1]:8080");
    EXPECT_EQ(Address{}.to_string(), "127.0.0.1:8080"); // the default
}

TEST(ConfAddress, Rejected)
{
    using Why = ferry::conf::detail::Rejection::Why;
    struct Case {
        std::string text;
        Why why;
        std::string reason; // "" = none
        bool port;          // what is expected is a port number
    };
    const std::vector<Case> cases{
        {"localhost", Why::invalid, "no port", false},
        {"", Why::invalid, "no port", false},
        {"::1:80", Why::invalid, "invalid host (write IPv6 addresses in brackets: \"[::1]:8080\")", false},
        {"[]:80", Why::invalid, "invalid host (write IPv6 addresses in brackets: \"[::1]:8080\")", false},
        {"a b:80", Why::invalid, "invalid host (write IPv6 addresses in brackets: \"[::1]:8080\")", false},
        {"127.0.0.1:", Why::invalid, "", true},
        {"127.0.0.1:http", Why::invalid, "", true},
        {"127.0.0.1:-1", Why::invalid, "", true},
        {"127.0.0.1:70000", Why::out_of_range, "", true},
        {"127.0.0.1:99999999999999999999999", Why::invalid, "", true},
    };
    for (const Case &c : cases) {
        const auto parsed = ferry::conf::detail::parse_address(c.text);
        ASSERT_FALSE(parsed) << c.text;
        EXPECT_EQ(parsed.error().why, c.why) << c.text;
        EXPECT_EQ(parsed.error().reason, c.reason) << c.text;
        EXPECT_EQ(contains(std::string(parsed.error().expected), "port number"), c.port) << c.text;
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
        const auto loaded = ferry::conf::load_string(text, "dumped", {}, fake_env());
        ASSERT_TRUE(loaded) << loaded.error().message << "\n" << text;
        LoadResult again = *loaded;
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
          "max_header_size: 32768B", "max_pipelined: 4", "read_header: 5s", "read_body: 90s", "write: 120s",
          "idle: 500ms", "num_workers: 3", "max_jobs: 1000", "allocate_timeout: 1500ms",
          "destroy_timeout: 3600s"}) {
        EXPECT_TRUE(contains(text, key)) << "missing " << key << " in\n" << text;
    }
}
