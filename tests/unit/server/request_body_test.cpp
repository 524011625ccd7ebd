#include "handlers/request_body.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <string>
#include <unistd.h>
#include <vector>

using ferry::Budget;
using ferry::server::detail::RequestBody;

namespace {

struct TempDir {
    std::string path;
    TempDir()
    {
        char tmpl[] = "/tmp/ferry-body-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() { ::rmdir(path.c_str()); }
    std::vector<std::string> entries() const
    {
        std::vector<std::string> out;
        if (DIR *d = ::opendir(path.c_str())) {
            while (auto *e = ::readdir(d))
                if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
                    out.emplace_back(e->d_name);
            ::closedir(d);
        }
        return out;
    }
};

std::string read_all(const ferry::pool::BodyRef &r)
{
    if (r.fd < 0)
        return std::string(r.memory);
    std::string out(r.size, '\0');
    EXPECT_EQ(::pread(r.fd, out.data(), out.size(), 0), static_cast<ssize_t>(out.size()));
    return out;
}

} // namespace

TEST(RequestBody, SmallBodiesStayInMemoryWithinTheBudget)
{
    TempDir dir;
    Budget budget(1000);
    RequestBody b(budget, 100, dir.path);
    b.begin(0);
    EXPECT_TRUE(b.write("hello ").has_value());
    EXPECT_TRUE(b.write("world").has_value());
    EXPECT_FALSE(b.in_file());
    EXPECT_EQ(read_all(b.ref()), "hello world");
    EXPECT_EQ(budget.used(), 11u);
    b.clear();
    EXPECT_EQ(budget.used(), 0u);
}

TEST(RequestBody, LargerThanItsShareGoesToAnUnnamedFile)
{
    TempDir dir;
    Budget budget(1 << 20);
    RequestBody b(budget, 100, dir.path);
    b.begin(0); // chunked: size unknown
    std::string want;
    for (int i = 0; i < 30; ++i) {
        std::string piece = "piece " + std::to_string(i) + ";";
        want += piece;
        ASSERT_TRUE(b.write(piece).has_value());
    }
    EXPECT_TRUE(b.in_file());
    EXPECT_EQ(budget.used(), 0u) << "memory given back once spilled";
    EXPECT_EQ(read_all(b.ref()), want);
    EXPECT_TRUE(dir.entries().empty()) << "the temp file has a name";
}

TEST(RequestBody, AnAnnouncedLargeBodyGoesToAFileFromTheStart)
{
    TempDir dir;
    Budget budget(1 << 20);
    RequestBody b(budget, 100, dir.path);
    b.begin(5000);
    EXPECT_TRUE(b.in_file());
    ASSERT_TRUE(b.write(std::string(5000, 'z')).has_value());
    EXPECT_EQ(read_all(b.ref()), std::string(5000, 'z'));
}

TEST(RequestBody, AFullBudgetSpillsInsteadOfGrowing)
{
    TempDir dir;
    Budget budget(150);
    RequestBody a(budget, 100, dir.path), b(budget, 100, dir.path);
    a.begin(100);
    ASSERT_TRUE(a.write(std::string(100, 'a')).has_value());
    EXPECT_FALSE(a.in_file());
    b.begin(100); // only 50 bytes left in the budget
    ASSERT_TRUE(b.write(std::string(100, 'b')).has_value());
    EXPECT_TRUE(b.in_file());
    EXPECT_LE(budget.used(), 150u);
    EXPECT_EQ(read_all(b.ref()), std::string(100, 'b'));
}

TEST(RequestBody, AnUnwritableDirectoryIsA500NamingIt)
{
    Budget budget(1 << 20);
    RequestBody b(budget, 10, "/nonexistent/ferry-dir");
    b.begin(0);
    auto r = b.write(std::string(50, 'x'));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, 500);
    EXPECT_NE(r.error().message.find("/nonexistent/ferry-dir"), std::string::npos) << r.error().message;
}
