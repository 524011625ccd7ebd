// -o key.path=value overrides, loading files, the process environment.
#include "conf_test_util.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace conf_test;
using ferry::conf::load_file;

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
    EXPECT_EQ(r.config.http.address.to_string(), "0.0.0.0:9000");
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
    const std::string e = error_of(minimal + "http: nope\n", {"http.pool.num_workers=3"});
    EXPECT_TRUE(contains(e, "http.pool.num_workers=3")) << e;
    EXPECT_TRUE(contains(e, ".rr.yaml:4:7")) << e;
}

TEST(ConfOverrides, Malformed)
{
    for (const std::string bad :
         {"http.pool.num_workers", "=4", " =4", "http..pool=1", "http.pool.=1", ".x=1"}) {
        const std::string e = error_of(minimal, {bad});
        EXPECT_TRUE(contains(e, "invalid override \"" + bad + "\"")) << e;
    }
    const std::string e = error_of(minimal, {"server.command=[php"});
    EXPECT_TRUE(contains(e, "invalid override \"server.command=[php\"")) << e;
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
    const auto r = load_file(path, {"http.pool.num_workers=5"}, fake_env());
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->config.source, path);
    EXPECT_EQ(r->config.http.pool.num_workers, 5u);
    EXPECT_EQ(r->config.http.address.to_string(), "0.0.0.0:9000");
}

TEST_F(ConfFile, MissingFile)
{
    const std::string path = (dir_ / "nope.yaml").string();
    const auto r = load_file(path, {}, fake_env());
    ASSERT_FALSE(r) << "no error";
    EXPECT_TRUE(contains(r.error().message, path)) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, std::strerror(ENOENT))) << r.error().message;
}

TEST_F(ConfFile, DirectoryIsAnError)
{
    const auto r = load_file(dir_.string(), {}, fake_env());
    ASSERT_FALSE(r) << "no error";
    EXPECT_EQ(r.error().message,
              dir_.string() + ": cannot read the configuration file: it is a directory, not a regular file");
}

// /dev/zero used to be read until std::bad_alloc (2 GB in), a FIFO without a writer to block forever.
TEST_F(ConfFile, DeviceIsRefusedBeforeReading)
{
    const auto r = load_file("/dev/zero", {}, fake_env());
    ASSERT_FALSE(r) << "no error";
    EXPECT_EQ(r.error().message,
              "/dev/zero: cannot read the configuration file: it is a character device, not a regular file");
}

TEST_F(ConfFile, FifoIsRefusedWithoutBlocking)
{
    const std::string path = (dir_ / "fifo.yaml").string();
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
    const auto start = std::chrono::steady_clock::now();
    const auto r = load_file(path, {}, fake_env()); // no writer: a blocking open would never return
    ASSERT_FALSE(r) << "no error";
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    EXPECT_EQ(r.error().message,
              path + ": cannot read the configuration file: it is a FIFO, not a regular file");
}

TEST_F(ConfFile, LargerThanFourMiBIsRefused)
{
    const std::string path = (dir_ / "big.yaml").string();
    {
        std::ofstream out(path);
        out << minimal << "# " << std::string(ferry::conf::max_config_file_size, 'x') << "\n";
    }
    const auto r = load_file(path, {}, fake_env());
    ASSERT_FALSE(r) << "no error";
    EXPECT_EQ(r.error().message, path + ": cannot read the configuration file: it is " +
                                     std::to_string(std::filesystem::file_size(path)) +
                                     " bytes, more than the 4 MiB a configuration file may have");
}

TEST_F(ConfFile, FourMiBIsRead)
{
    std::string content = minimal + "# ";
    content += std::string(ferry::conf::max_config_file_size - content.size() - 1, 'x') + "\n";
    ASSERT_EQ(content.size(), ferry::conf::max_config_file_size);
    const std::string path = write("limit.yaml", content);
    const auto r = load_file(path, {}, fake_env());
    EXPECT_TRUE(r) << r.error().message;
}

TEST_F(ConfFile, SyntaxErrorNamesFileAndLine)
{
    const std::string path =
        write("bad.yaml", "version: \"3\"\nserver:\n  command: php w.php\n  env: {A: 1\n");
    const auto r = load_file(path, {}, fake_env());
    ASSERT_FALSE(r) << "no error";
    EXPECT_TRUE(contains(r.error().message, path + ":5:")) << r.error().message;
}

TEST_F(ConfFile, ErrorNamesFile)
{
    const std::string path = write("w.yaml", minimal + "http:\n  pool:\n    num_workers: many\n");
    const auto r = load_file(path, {}, fake_env());
    ASSERT_FALSE(r) << "no error";
    EXPECT_EQ(r.error().message, path + ":6:18: http.pool.num_workers: \"many\" is not a valid value "
                                        "(expected a non-negative integer)");
}

TEST(ConfProcessEnv, ReadsTheEnvironment)
{
    ::setenv("FERRY_CONF_TEST_VAR", "42", 1);
    ::unsetenv("FERRY_CONF_TEST_UNSET");
    const EnvLookup env = ferry::conf::process_env();
    EXPECT_EQ(env("FERRY_CONF_TEST_VAR"), std::optional<std::string>("42"));
    EXPECT_EQ(env("FERRY_CONF_TEST_UNSET"), std::nullopt);
    EXPECT_EQ(*ferry::conf::expand_env("${FERRY_CONF_TEST_VAR}", env), "42");
}
