// .env files (`ferry serve --dotenv`): the syntax RoadRunner's godotenv and PHP's dotenv readers share,
// errors naming file and line, and the environment winning over the file.
#include "ferry/conf/dotenv.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

using ferry::conf::DotenvVars;
using ferry::conf::load_dotenv;
using ferry::conf::parse_dotenv;

TEST(Dotenv, TheCommonSyntax)
{
    const auto r = parse_dotenv("# comment\n"
                                "\n"
                                "APP_ENV=prod\n"
                                "  export DB_HOST = db.local  \n"
                                "EMPTY=\n"
                                "URL=http://x/#anchor # a comment\n"
                                "HASH=#not-a-comment\n"
                                "DQ=\"a\\nb \\\"q\\\" \\\\ $X\"  # comment\n"
                                "SQ='literal $X \\n'\n"
                                "MULTI=\"line 1\n"
                                "line 2\"\n"
                                "CRLF=yes\r\n"
                                "LAST=no newline",
                                ".env");
    ASSERT_TRUE(r) << r.error().message;
    const DotenvVars expected{
        {"APP_ENV", "prod"},         {"DB_HOST", "db.local"},     {"EMPTY", ""},
        {"URL", "http://x/#anchor"}, {"HASH", "#not-a-comment"},  {"DQ", "a\nb \"q\" \\ $X"},
        {"SQ", "literal $X \\n"},    {"MULTI", "line 1\nline 2"}, {"CRLF", "yes"},
        {"LAST", "no newline"}};
    EXPECT_EQ(*r, expected);
}

TEST(Dotenv, ErrorsNameFileLineAndWhatIsWrong)
{
    const std::pair<std::string, std::string> cases[] = {
        {"A=1\njust words\n", ".env:2: expected NAME=value, got \"just words\""},
        {"A=1\n1ABC=x\n", ".env:2: expected NAME=value, got \"1ABC=x\""},
        {"A=1\n\nB=\"open\nstill open\n", ".env:3: the value of B has no closing \""},
        {"A='x' trailing\n", ".env:1: text after the closing quote of A's value: \"trailing\""},
        {"A=\"x\ny\" z\n", ".env:2: text after the closing quote of A's value: \"z\""},
        {"=value\n", ".env:1: expected NAME=value, got \"=value\""},
    };
    for (const auto &[text, message] : cases) {
        const auto r = parse_dotenv(text, ".env");
        ASSERT_FALSE(r) << text;
        EXPECT_EQ(r.error().message, message) << text;
    }
}

TEST(Dotenv, TheEnvironmentWins)
{
    char path[] = "/tmp/ferry-dotenv-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    {
        std::ofstream out(path);
        out << "FERRY_DOTENV_TEST_NEW=from-file\nFERRY_DOTENV_TEST_SET=from-file\n";
    }
    ::setenv("FERRY_DOTENV_TEST_SET", "from-env", 1);
    ::unsetenv("FERRY_DOTENV_TEST_NEW");
    const auto r = load_dotenv(path);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(*r, std::vector<std::string>{"FERRY_DOTENV_TEST_NEW"});
    EXPECT_STREQ(std::getenv("FERRY_DOTENV_TEST_NEW"), "from-file");
    EXPECT_STREQ(std::getenv("FERRY_DOTENV_TEST_SET"), "from-env");
    std::remove(path);
    const auto missing = load_dotenv(path);
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().message, std::string("cannot read ") + path + ": No such file or directory");
}

// A .env file is read like the configuration file: a regular file of bounded size, never a device or a FIFO.
TEST(Dotenv, OnlyASmallRegularFile)
{
    const auto device = load_dotenv("/dev/zero");
    ASSERT_FALSE(device);
    EXPECT_EQ(device.error().message, "cannot read /dev/zero: it is a character device, not a regular file");
    const auto directory = load_dotenv("/tmp");
    ASSERT_FALSE(directory);
    EXPECT_EQ(directory.error().message, "cannot read /tmp: it is a directory, not a regular file");
    char path[] = "/tmp/ferry-dotenv-big-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    {
        std::ofstream out(path);
        out << "A=" << std::string((1 << 20), 'x') << "\n";
    }
    const auto big = load_dotenv(path);
    std::remove(path);
    ASSERT_FALSE(big);
    EXPECT_EQ(big.error().message, std::string("cannot read ") + path +
                                       ": it is 1048579 bytes, more than the 1 MiB a .env file may have");
}
