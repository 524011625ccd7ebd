// The pure parts of the static files handler: request paths, HTTP dates, entity tags, ranges,
// Accept-Encoding, the MIME table and the file cache's revalidation.
#include "static/conditional.hpp"
#include "static/file_cache.hpp"
#include "static/mime.hpp"
#include "static/path.hpp"
#include "static/static_handler.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace ferry::server::detail;
using Kind = StaticPath::Kind;

namespace {

StaticPath P(std::string_view t)
{
    return resolve_static_path(t);
}

TEST(StaticPath, NormalisesAndDecodes)
{
    EXPECT_EQ(P("/css/site.css").rel, "css/site.css");
    EXPECT_EQ(P("/css/site.css?v=1#x").rel, "css/site.css");
    EXPECT_EQ(P("//css/./site%20x.css").rel, "css/site x.css");
    EXPECT_EQ(P("/").rel, "");
    EXPECT_TRUE(P("/docs/").trailing_slash);
    EXPECT_FALSE(P("/docs").trailing_slash);
    EXPECT_EQ(P("http://example.com/a/b?q").rel, "a/b");
    EXPECT_EQ(P("http://example.com").rel, "");
    EXPECT_EQ(P("/caf%C3%A9.txt").rel, "caf\xC3\xA9.txt");
    EXPECT_EQ(P("/a+b.txt").rel, "a+b.txt") << "'+' is a plus in a path";
}

TEST(StaticPath, RefusesTraversalAndControlBytes)
{
    for (const char *t :
         {"/../x", "/a/../../x", "/%2e%2e/x", "/%2E%2e/x", "/.%2e/x", "/a/..", "/./../x", "/a%2fb", "/a%2Fb",
          "/a\\b", "/a%5cb", "/a%00b", "/a%0ab", "/a%7f", "/%", "/%4", "/%zz", "/a/%2e%2e%2f/x"}) {
        EXPECT_EQ(P(t).kind, Kind::traversal) << t;
        EXPECT_EQ(P(t).rel, "") << t;
    }
}

TEST(StaticPath, HiddenSegments)
{
    for (const char *t : {"/.env", "/.git/config", "/css/.hidden.css", "/%2eenv", "/..;/x", "/.well-known/x"})
        EXPECT_EQ(P(t).kind, Kind::hidden) << t;
    EXPECT_EQ(P("/.git/../../x").kind, Kind::traversal) << "a later '..' is still a traversal";
    EXPECT_EQ(P("/a.b/c.d").kind, Kind::ok);
}

TEST(HttpDate, ThreeForms)
{
    const std::time_t t = 784111777; // Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example)
    EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), t);
    EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), t);
    EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), t);
    EXPECT_EQ(parse_http_date("  Sun, 06 Nov 1994 08:49:37 GMT "), t);
    EXPECT_FALSE(parse_http_date("yesterday"));
    EXPECT_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT trailing"));
    EXPECT_FALSE(parse_http_date(""));
}

TEST(EntityTags, WeakAndStrongComparison)
{
    EXPECT_TRUE(none_match_hits("\"a\"", "\"a\""));
    EXPECT_TRUE(none_match_hits("W/\"a\"", "\"a\""));
    EXPECT_TRUE(none_match_hits("\"a\"", "W/\"a\""));
    EXPECT_TRUE(none_match_hits("\"x\", \"y\" ,W/\"a\"", "W/\"a\""));
    EXPECT_TRUE(none_match_hits("*", "\"a\""));
    EXPECT_FALSE(none_match_hits("\"b\"", "\"a\""));
    EXPECT_FALSE(none_match_hits("", "\"a\""));
    EXPECT_TRUE(strong_etag_equal("\"a\"", "\"a\""));
    EXPECT_FALSE(strong_etag_equal("W/\"a\"", "W/\"a\""));
    EXPECT_FALSE(strong_etag_equal("\"a\"", "W/\"a\""));
}

TEST(Ranges, SingleRangesOnly)
{
    using RK = ByteRange::Kind;
    auto r = parse_range("bytes=0-9", 100);
    EXPECT_EQ(r.kind, RK::satisfiable);
    EXPECT_EQ(r.first, 0u);
    EXPECT_EQ(r.length, 10u);
    r = parse_range("bytes=90-", 100);
    EXPECT_EQ(r.first, 90u);
    EXPECT_EQ(r.length, 10u);
    r = parse_range("bytes=-30", 100);
    EXPECT_EQ(r.first, 70u);
    EXPECT_EQ(r.length, 30u);
    r = parse_range("bytes=-300", 100);
    EXPECT_EQ(r.first, 0u);
    EXPECT_EQ(r.length, 100u);
    r = parse_range("bytes=50-5000", 100);
    EXPECT_EQ(r.length, 50u);
    EXPECT_EQ(parse_range("bytes=100-", 100).kind, RK::unsatisfiable);
    EXPECT_EQ(parse_range("bytes=-0", 100).kind, RK::unsatisfiable);
    EXPECT_EQ(parse_range("bytes=0-0", 0).kind, RK::unsatisfiable);
    for (const char *bad : {"bytes=5-3", "bytes=0-1,3-4", "items=0-1", "bytes=a-b", "bytes=-", "bytes=1", "",
                            "bytes=18446744073709551616-"})
        EXPECT_EQ(parse_range(bad, 100).kind, RK::none) << bad;
}

TEST(AcceptEncoding, QValues)
{
    EXPECT_EQ(accept_encoding_q("gzip, br", "br"), 1.0);
    EXPECT_EQ(accept_encoding_q("gzip;q=0.5, br;q=0", "br"), 0.0);
    EXPECT_EQ(accept_encoding_q("gzip;q=0.5, br;q=0", "gzip"), 0.5);
    EXPECT_EQ(accept_encoding_q("*", "br"), 1.0);
    EXPECT_EQ(accept_encoding_q("*;q=0, gzip", "br"), 0.0);
    EXPECT_EQ(accept_encoding_q("BR", "br"), 1.0);
    EXPECT_EQ(accept_encoding_q("", "gzip"), 0.0);
    EXPECT_EQ(accept_encoding_q("gzip;q=2", "gzip"), 0.0) << "an invalid q-value is not acceptance";
}

TEST(MimeTypes, FromTheSystemTable)
{
    MimeTypes m;
    ASSERT_TRUE(m.loaded()) << "/etc/mime.types (media-types) is missing";
    EXPECT_EQ(m.for_file("a/site.css"), "text/css; charset=utf-8");
    EXPECT_EQ(m.for_file("LOGO.PNG"), "image/png");
    EXPECT_EQ(m.for_file("x.tar.gz"), "application/gzip");
    EXPECT_EQ(m.for_file("noext"), "application/octet-stream");
    EXPECT_EQ(m.for_file("x.definitely-unknown"), "application/octet-stream");
    EXPECT_EQ(m.for_file("dir.d/file"), "application/octet-stream");

    char path[] = "/tmp/ferry-mime-XXXXXX";
    int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    std::ofstream(path) << "# comment\ntext/x-one one ONE\napplication/x-two two one # later: ignored\n";
    MimeTypes own(path);
    std::remove(path);
    EXPECT_EQ(own.size(), 2u);
    EXPECT_EQ(own.for_file("a.one"), "text/x-one; charset=utf-8");
    EXPECT_EQ(own.for_file("a.two"), "application/x-two");
    EXPECT_FALSE(MimeTypes("/nonexistent/mime.types").loaded());
}

TEST(FileCache, RevalidatesAfterASecondAndEvicts)
{
    char dir[] = "/tmp/ferry-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    std::string d = dir;
    std::ofstream(d + "/a.txt") << "one";
    int root = ::open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root, 0);
    ferry::conf::StaticConfig cfg;
    cfg.max_open_files = 3;
    MimeTypes mime;
    FileCache cache(root, cfg, mime);
    auto t0 = FileCache::clock::now();
    FoundFile a = cache.find("a.txt", t0);
    ASSERT_EQ(a.kind, FoundFile::Kind::file);
    EXPECT_EQ(a.file->size, 3u);
    EXPECT_EQ(a.file->content_type, "text/plain; charset=utf-8");
    EXPECT_EQ(cache.find("missing", t0).kind, FoundFile::Kind::missing);
    EXPECT_EQ(cache.find("", t0).kind, FoundFile::Kind::directory);

    std::ofstream(d + "/a.txt.new") << "three";
    ASSERT_EQ(::rename((d + "/a.txt.new").c_str(), (d + "/a.txt").c_str()), 0);
    EXPECT_EQ(cache.find("a.txt", t0).file->size, 3u) << "trusted for a second";
    FoundFile b = cache.find("a.txt", t0 + std::chrono::milliseconds(1001));
    ASSERT_EQ(b.kind, FoundFile::Kind::file);
    EXPECT_EQ(b.file->size, 5u);
    EXPECT_NE(b.file->etag, a.file->etag);
    EXPECT_NE(b.file->fd, a.file->fd) << "the old version stays open for whoever holds it";
    FoundFile same = cache.find("a.txt", t0 + std::chrono::milliseconds(2100));
    EXPECT_EQ(same.file.get(), b.file.get()) << "unchanged on disk: the same open file";

    ASSERT_EQ(::unlink((d + "/a.txt").c_str()), 0);
    EXPECT_EQ(cache.find("a.txt", t0 + std::chrono::seconds(4)).kind, FoundFile::Kind::missing);
    ::symlink("/etc/hostname", (d + "/out").c_str());
    EXPECT_EQ(cache.find("out", t0 + std::chrono::seconds(4)).kind, FoundFile::Kind::forbidden);
    ::unlink((d + "/out").c_str());
    for (const char *name : {"x1", "x2", "x3", "x4"})
        cache.find(name, t0);
    EXPECT_EQ(cache.size(), 3u) << "bounded by max_open_files";
    ::close(root);
    ::rmdir(dir);
}

TEST(FileCache, LongPathsAreLookedUpButNotKept)
{
    char dir[] = "/tmp/ferry-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    int root = ::open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root, 0);
    ferry::conf::StaticConfig cfg;
    MimeTypes mime;
    FileCache cache(root, cfg, mime);
    const auto now = FileCache::clock::now();
    EXPECT_EQ(cache.find(std::string(FileCache::max_cached_path + 1, 'a'), now).kind,
              FoundFile::Kind::missing);
    EXPECT_EQ(cache.find(std::string(4000, 'b'), now).kind, FoundFile::Kind::missing);
    EXPECT_EQ(cache.size(), 0u);
    EXPECT_EQ(cache.find("short", now).kind, FoundFile::Kind::missing);
    EXPECT_EQ(cache.size(), 1u);
    ::close(root);
    ::rmdir(dir);
}

TEST(FileCache, SymlinksToHiddenNamesAreHidden)
{
    char dir[] = "/tmp/ferry-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    std::string d = dir;
    ASSERT_EQ(::mkdir((d + "/.git").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((d + "/sub").c_str(), 0755), 0);
    std::ofstream(d + "/.env") << "secret";
    std::ofstream(d + "/.git/config") << "secret";
    std::ofstream(d + "/sub/plain.txt") << "plain";
    std::ofstream(d + "/app.php") << "<?php";
    ASSERT_EQ(::symlink(".env", (d + "/env.txt").c_str()), 0);
    ASSERT_EQ(::symlink(".git", (d + "/pub").c_str()), 0);
    ASSERT_EQ(::symlink("../.git/config", (d + "/sub/cfg.txt").c_str()), 0);
    ASSERT_EQ(::symlink("env.txt", (d + "/chain.txt").c_str()), 0);
    ASSERT_EQ(::symlink("sub/plain.txt", (d + "/plain.txt").c_str()), 0);
    ASSERT_EQ(::symlink("sub", (d + "/dir").c_str()), 0);
    ASSERT_EQ(::symlink("app.php", (d + "/app.txt").c_str()), 0);
    int root = ::open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root, 0);
    ferry::conf::StaticConfig cfg;
    cfg.forbid = {".php"};
    MimeTypes mime;
    FileCache cache(root, cfg, mime);
    const auto now = FileCache::clock::now();
    for (const char *rel : {"env.txt", "pub", "pub/config", "sub/cfg.txt", "chain.txt", "app.txt"})
        EXPECT_EQ(cache.find(rel, now).kind, FoundFile::Kind::hidden) << rel;
    EXPECT_EQ(cache.find("plain.txt", now).kind, FoundFile::Kind::file);
    EXPECT_EQ(cache.find("dir/plain.txt", now).kind, FoundFile::Kind::file);
    EXPECT_EQ(cache.find("dir", now).kind, FoundFile::Kind::directory);
    EXPECT_EQ(cache.find("sub/plain.txt", now).kind, FoundFile::Kind::file);
    ::close(root);
    EXPECT_EQ(std::system(("rm -rf " + d).c_str()), 0);
}

TEST(FileCache, UnusedEntriesAreSweptAndTheCapacityBoundsThem)
{
    char dir[] = "/tmp/ferry-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    std::string d = dir;
    for (const char *name : {"a", "b", "c"})
        std::ofstream(d + "/" + name) << name;
    int root = ::open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root, 0);
    ferry::conf::StaticConfig cfg; // max_open_files 1024, lowered to 2 by the descriptor budget
    MimeTypes mime;
    FileCache cache(root, cfg, mime, 2);
    EXPECT_EQ(cache.capacity(), 2u);
    const auto t0 = FileCache::clock::now();
    ASSERT_EQ(cache.find("a", t0).kind, FoundFile::Kind::file);
    ASSERT_EQ(cache.find("b", t0 + std::chrono::seconds(2)).kind, FoundFile::Kind::file);
    FoundFile held = cache.find("c", t0 + std::chrono::seconds(2));
    EXPECT_EQ(cache.size(), 2u) << "a, the least recently used, made room";
    cache.sweep(t0 + std::chrono::seconds(4));
    EXPECT_EQ(cache.size(), 2u) << "used 2 s ago: kept";
    cache.sweep(t0 + std::chrono::seconds(2) + FileCache::inactive);
    EXPECT_EQ(cache.size(), 0u) << "unused for FileCache::inactive: dropped";
    EXPECT_GE(::fcntl(held.file->fd, F_GETFD), 0) << "whoever holds a file keeps it open";
    ::close(root);
    EXPECT_EQ(std::system(("rm -rf " + d).c_str()), 0);
}

TEST(StaticHandler, PathsThatGoToPhpAreRememberedWithinBounds)
{
    char dir[] = "/tmp/ferry-static-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    std::ofstream(std::string(dir) + "/site.css") << "body{}";
    int root = ::open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root, 0);
    ferry::conf::StaticConfig cfg;
    cfg.max_open_files = 8;
    MimeTypes mime;
    StaticHandler h(cfg, root, mime);
    ferry::server::Request req;
    req.method = "GET";
    for (int i = 0; i < 100; ++i) { // a client sending random paths
        req.target = "/api/item/" + std::to_string(i);
        EXPECT_FALSE(h.accepts(req));
        EXPECT_LE(h.remembered_php_paths(), 8u);
    }
    req.target = "/" + std::string(3000, 'x');
    EXPECT_FALSE(h.accepts(req));
    EXPECT_LE(h.remembered_php_paths(), 8u);
    req.target = "/site.css";
    EXPECT_TRUE(h.accepts(req));
    auto d = h.take_decision(req);
    EXPECT_EQ(d.kind, StaticHandler::Decision::Kind::serve);
    ASSERT_TRUE(d.file);
    EXPECT_EQ(d.file->size, 6u);
    EXPECT_EQ(h.take_decision(req).kind, StaticHandler::Decision::Kind::serve)
        << "decided again when not kept";
    req.method = "POST";
    EXPECT_FALSE(h.accepts(req)) << "other methods are PHP's";
    ::unlink((std::string(dir) + "/site.css").c_str());
    ::close(root);
    ::rmdir(dir);
}

} // namespace

// forbid: [""] (RoadRunner's own reference config has it): "" is the extension of a name without one, as Go's
// filepath.Ext reads it, so such files are not served; names with an extension still are.
TEST(StaticPath, AnEmptyExtensionMeansNamesWithoutOne)
{
    const auto loaded = ferry::conf::load_string(
        "version: \"3\"\nserver:\n  command: php w.php\nhttp:\n  static:\n    forbid: [\"\", PHP]\n",
        "t.yaml");
    ASSERT_TRUE(loaded) << loaded.error().message;
    const ferry::conf::StaticConfig &cfg = loaded->config.http.static_files;
    EXPECT_EQ(cfg.forbid, (std::vector<std::string>{"", ".php"}));
    EXPECT_TRUE(extension_denied(cfg, "/Makefile"));
    EXPECT_TRUE(extension_denied(cfg, "/dir.d/LICENSE"));
    EXPECT_TRUE(extension_denied(cfg, "/index.PHP"));
    EXPECT_FALSE(extension_denied(cfg, "/app.css"));
}
