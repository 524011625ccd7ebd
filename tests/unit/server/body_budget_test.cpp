// The body budget's rules for request bodies (issue 41): a connection's share, the reserve for small bodies;
// forms (urlencoded, multipart text fields) held within it; upload files a dead server left behind.
#include "forms/form_body.hpp"

#include "forms/multipart_body.hpp"
#include "forms/upload_files.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/file.h>
#include <unistd.h>

using ferry::Budget;
using ferry::Reservation;
using namespace ferry::server::detail;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

TEST(BodyBudget, AConnectionHoldsAtMostAnEighth)
{
    Budget b(16 * MiB);
    EXPECT_EQ(b.share(), 2 * MiB);
    Reservation r;
    EXPECT_EQ(r.grow_request(b, 2 * MiB), Budget::Take::ok);
    EXPECT_EQ(r.grow_request(b, 1), Budget::Take::over_share);
    EXPECT_EQ(b.used(), 2 * MiB);
}

TEST(BodyBudget, TheLastEighthIsKeptForSmallBodies)
{
    Budget b(16 * MiB);
    std::vector<Reservation> big(8);
    int granted = 0;
    for (auto &r : big)
        granted += r.grow_request(b, 2 * MiB) == Budget::Take::ok;
    EXPECT_EQ(granted, 7); // 14 MiB of 16
    Reservation past_small;
    EXPECT_EQ(past_small.grow_request(b, Budget::small_body + 1), Budget::Take::spent);
    Reservation small;
    EXPECT_EQ(small.grow_request(b, Budget::small_body), Budget::Take::ok);
    // A small body that grows past small_body takes from the first 7/8 only: spent.
    EXPECT_EQ(small.grow_request(b, 1), Budget::Take::spent);
}

TEST(BodyBudget, ATinyBudgetIsAllForSmallBodies)
{
    Budget b(1000); // share() is small_body: the rules above never apply
    Reservation r;
    EXPECT_EQ(r.grow_request(b, 1000), Budget::Take::ok);
    EXPECT_EQ(r.grow_request(b, 1), Budget::Take::spent);
}

TEST(FormBody, CountsItsCapacityAndNamesTheShare)
{
    Budget b(16 * MiB);
    FormBody f(b, 8 * MiB);
    f.begin(1000);
    ASSERT_TRUE(f.write("a=1").has_value());
    EXPECT_EQ(b.used(), 1000u) << "Content-Length is reserved at the first bytes";
    f.drop_text();
    EXPECT_EQ(b.used(), 1000u) << "kept for the parsed tree";
    f.clear();
    EXPECT_EQ(b.used(), 0u);
    f.begin(4 * MiB); // within max_form_size, past the share
    auto r = f.write("a=");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, 413);
    EXPECT_NE(r.error().message.find("share of http.limits.max_body_memory"), std::string::npos);
}

std::string field(const std::string &value)
{
    return "--B\r\nContent-Disposition: form-data; name=\"t\"\r\n\r\n" + value;
}

TEST(MultipartBody, TextFieldsCountAgainstTheBudget)
{
    Budget b(16 * MiB);
    UploadRules rules;
    rules.dir = "/tmp";
    rules.budget = &b;
    std::vector<std::unique_ptr<MultipartBody>> held;
    int refused = 0;
    for (int i = 0; i < 12; ++i) {
        auto m = std::make_unique<MultipartBody>(rules);
        m->start("multipart/form-data; boundary=B");
        m->begin(0);
        auto r = m->write(field(std::string(3 * MiB / 2, 'v')));
        if (r) {
            held.push_back(std::move(m));
        } else {
            EXPECT_EQ(r.error().status, 503);
            ++refused;
        }
    }
    EXPECT_GT(refused, 0);
    EXPECT_LE(b.used(), 14 * MiB);
    held.clear();
    EXPECT_EQ(b.used(), 0u) << "given back when the connection ends";
}

TEST(UploadsDir, RemovesTheFilesOfServersNoLongerRunning)
{
    char tmpl[] = "/tmp/ferry-uploads-test-XXXXXX";
    std::string dir = ::mkdtemp(tmpl);
    auto touch = [&](const std::string &name, std::size_t size) {
        int fd = ::open((dir + "/" + name).c_str(), O_CREAT | O_WRONLY, 0600);
        EXPECT_EQ(::write(fd, std::string(size, 'z').data(), size), static_cast<ssize_t>(size));
        return fd;
    };
    ::close(touch("ferry-upload-111-0000abcd-x1", 1000)); // no lock file: its server is gone
    ::close(touch("ferry-upload-111-0000abcd-x2", 500));
    ::close(touch("ferry-upload-222-0000beef.lock", 0)); // a lock nobody holds
    ::close(touch("ferry-upload-222-0000beef-y1", 100));
    int live = touch("ferry-upload-333-0000cafe.lock", 0); // a running server's
    ASSERT_EQ(::flock(live, LOCK_EX | LOCK_NB), 0);
    ::close(touch("ferry-upload-333-0000cafe-z1", 10));
    ::close(touch("ferry-upload-abcdef", 10)); // an older server's name: left alone
    // flock is per open file: the scan's own open of 333's lock cannot take it, as another server's could
    // not.
    std::optional<UploadsDir> mine(std::in_place);
    StaleUploads removed;
    ASSERT_TRUE(mine->claim(dir, removed));
    EXPECT_EQ(removed.files, 3u);
    EXPECT_EQ(removed.bytes, 1600u);
    EXPECT_EQ(describe(removed), "removed 3 stale upload file(s), 0.0 MB, left by pids 111, 222");
    EXPECT_EQ(::access((dir + "/ferry-upload-222-0000beef.lock").c_str(), F_OK), -1);
    EXPECT_EQ(::access((dir + "/ferry-upload-333-0000cafe-z1").c_str(), F_OK), 0);
    EXPECT_EQ(::access((dir + "/ferry-upload-abcdef").c_str(), F_OK), 0);
    EXPECT_EQ(mine->prefix().rfind("ferry-upload-" + std::to_string(::getpid()) + "-", 0), 0u)
        << mine->prefix();
    ::close(live);
    ::unlink((dir + "/ferry-upload-333-0000cafe.lock").c_str());
    ::unlink((dir + "/ferry-upload-333-0000cafe-z1").c_str());
    ::unlink((dir + "/ferry-upload-abcdef").c_str());
    mine.reset();
    EXPECT_EQ(::rmdir(dir.c_str()), 0) << "the lock file goes with its owner";
}

} // namespace
