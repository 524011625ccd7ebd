// logs (RoadRunner's logger plugin) and http.access_logs: what mode implies, what level and encoding
// override, the aliases, output, bad values naming key and line, the RoadRunner keys Ferry warns about.
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace conf_test;

namespace {

ferry::conf::LogsConfig logs_of(const std::string &section, const std::vector<std::string> &overrides = {})
{
    return load(minimal + section, overrides).config.logs;
}

} // namespace

TEST(ConfLogs, AbsentKeepsFerrysDefaultsAndIsNotDumped)
{
    const LoadResult r = load(minimal);
    EXPECT_FALSE(r.config.logs.enabled);
    EXPECT_EQ(r.config.logs.level, "info");
    EXPECT_EQ(r.config.logs.encoding, "console");
    EXPECT_EQ(r.config.logs.output, "stderr");
    EXPECT_FALSE(contains(ferry::conf::dump(r.config), "\nlogs:"));
    EXPECT_FALSE(r.config.http.access_logs);
}

TEST(ConfLogs, ModeImpliesLevelAndEncodingAsInRoadRunner)
{
    struct Case {
        std::string yaml, mode, level, encoding;
    };
    const std::vector<Case> cases{
        {"logs: {}\n", "development", "debug", "console"}, // RoadRunner's default mode
        {"logs:\n  mode: development\n", "development", "debug", "console"},
        {"logs:\n  mode: production\n", "production", "info", "json"},
        {"logs:\n  mode: raw\n", "raw", "info", "console"},
        {"logs:\n  mode: off\n", "off", "info", "console"},
        {"logs:\n  mode: none\n", "off", "info", "console"},
        // explicit level and encoding win over the mode
        {"logs:\n  mode: production\n  level: warn\n  encoding: console\n", "production", "warn", "console"},
        {"logs:\n  mode: development\n  encoding: json\n", "development", "debug", "json"},
        {"logs:\n  level: error\n", "development", "error", "console"},
        // "" says nothing, as in RoadRunner
        {"logs:\n  mode: production\n  level: \"\"\n  encoding: \"\"\n", "production", "info", "json"},
    };
    for (const Case &c : cases) {
        const auto logs = logs_of(c.yaml);
        EXPECT_TRUE(logs.enabled) << c.yaml;
        EXPECT_EQ(logs.mode, c.mode) << c.yaml;
        EXPECT_EQ(logs.level, c.level) << c.yaml;
        EXPECT_EQ(logs.encoding, c.encoding) << c.yaml;
    }
}

TEST(ConfLogs, LevelAliases)
{
    const std::vector<std::pair<std::string, std::string>> cases{
        {"debug", "debug"}, {"info", "info"},    {"warn", "warn"},   {"warning", "warn"},
        {"error", "error"}, {"dpanic", "error"}, {"panic", "error"}, {"fatal", "error"},
    };
    for (const auto &[written, resolved] : cases)
        EXPECT_EQ(logs_of("logs:\n  level: " + written + "\n").level, resolved) << written;
}

TEST(ConfLogs, Output)
{
    EXPECT_EQ(logs_of("logs:\n  output: stdout\n").output, "stdout");
    EXPECT_EQ(logs_of("logs:\n  output: /var/log/ferry.log\n").output, "/var/log/ferry.log");
    EXPECT_EQ(logs_of("logs:\n  output: \"\"\n").output, "stderr");
}

TEST(ConfLogs, BadValuesNameKeyAndLine)
{
    EXPECT_EQ(error_of(minimal + "logs:\n  mode: production\n  level: loud\n"),
              ".rr.yaml:6:10: logs.level: \"loud\" is not a valid value (expected \"debug\", \"info\", "
              "\"warn\" or \"error\")");
    EXPECT_EQ(error_of(minimal + "logs:\n  mode: quiet\n"),
              ".rr.yaml:5:9: logs.mode: \"quiet\" is not a valid value (expected \"development\", "
              "\"production\", \"raw\" or \"off\")");
    EXPECT_EQ(
        error_of(minimal + "logs:\n  encoding: xml\n"),
        ".rr.yaml:5:13: logs.encoding: \"xml\" is not a valid value (expected \"console\" or \"json\")");
    const std::string map = error_of(minimal + "logs:\n  output: {file: x}\n");
    EXPECT_TRUE(map.starts_with(".rr.yaml:5:11: logs.output: a map is not a valid value")) << map;
    const std::string access = error_of(minimal + "http:\n  access_logs: sometimes\n");
    EXPECT_TRUE(access.starts_with(".rr.yaml:5:16: http.access_logs: \"sometimes\" is not a valid value"))
        << access;
    // -o goes through the same checks
    EXPECT_TRUE(
        contains(error_of(minimal, {"logs.level=loud"}), "logs.level: \"loud\" is not a valid value"));
}

TEST(ConfLogs, RoadRunnerKeysFerryLacksAreWarned)
{
    const LoadResult r = load(minimal + R"(logs:
  mode: production
  line_ending: "\n"
  err_output: stderr
  channels:
    http:
      level: info
  file_logger_options:
    log_output: /tmp/rr.log
)");
    const std::vector<std::pair<std::string, std::string>> expected{
        {".rr.yaml:6:3:", "\"logs.line_ending\""},
        {".rr.yaml:7:3:", "\"logs.err_output\""},
        {".rr.yaml:8:3:", "\"logs.channels\""},
        {".rr.yaml:11:3:", "\"logs.file_logger_options\""},
    };
    ASSERT_EQ(r.warnings.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        EXPECT_TRUE(contains(r.warnings[i], expected[i].first)) << r.warnings[i];
        EXPECT_TRUE(contains(r.warnings[i], expected[i].second)) << r.warnings[i];
        EXPECT_TRUE(contains(r.warnings[i], "recognised but not supported yet; ignored")) << r.warnings[i];
    }
    EXPECT_EQ(r.config.logs.mode, "production"); // the rest of the section is read
}

TEST(ConfLogs, AccessLogs)
{
    EXPECT_TRUE(load(minimal + "http:\n  access_logs: true\n").config.http.access_logs);
    EXPECT_FALSE(load(minimal + "http:\n  access_logs: false\n").config.http.access_logs);
    EXPECT_TRUE(load(minimal, {"http.access_logs=true"}).config.http.access_logs);
    const LoadResult r = load(minimal + "http:\n  access_logs: true\n");
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
}

TEST(ConfLogs, OverrideTurnsTheSectionOnAndTheDumpLoadsBack)
{
    const auto logs = logs_of("", {"logs.level=warn"});
    EXPECT_TRUE(logs.enabled);
    EXPECT_EQ(logs.mode, "development");
    EXPECT_EQ(logs.level, "warn");

    const LoadResult r = load(minimal + "logs:\n  mode: none\n  level: panic\n  output: /tmp/x.log\n");
    const std::string text = ferry::conf::dump(r.config);
    EXPECT_TRUE(contains(text,
                         "logs:\n  mode: \"off\"\n  level: \"error\"\n  encoding: \"console\"\n  output: "
                         "\"/tmp/x.log\"\n"))
        << text;
    const auto again = ferry::conf::load_string(text, ".rr.yaml", {}, fake_env());
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->config, r.config);
}

// RoadRunner reads logs.output as a list of outputs too: Ferry writes to one, the first, and says so.
TEST(ConfLogs, OutputGivenAsAListUsesTheFirstAndWarnsOfTheRest)
{
    LoadResult r = load(minimal + "logs:\n  output: [stdout]\n");
    EXPECT_EQ(r.config.logs.output, "stdout");
    EXPECT_TRUE(r.warnings.empty());
    r = load(minimal + "logs:\n  output:\n    - stderr\n    - /var/log/app.log\n");
    EXPECT_EQ(r.config.logs.output, "stderr");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(
        contains(r.warnings[0], ":7:7: logs.output lists 2 values; Ferry uses one, the first (\"stderr\")"))
        << r.warnings[0];
    const std::string e = error_of(minimal + "logs:\n  output: [[stderr]]\n");
    EXPECT_TRUE(contains(e, ":5:12: logs.output: a list is not a valid value"))
        << e; // the item read as the scalar
}
