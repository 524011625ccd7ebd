#include "ferry/server/http_parser.hpp"

#include "parser_feed.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <vector>

using ferry::server::HttpParser;
using ferry::server::Limits;
using ferry::server::Request;
using Event = HttpParser::Event;
using parser_test::feed;
using parser_test::Outcome;

namespace {

const std::string get_req = "GET /path/x?a=1&b=%20 HTTP/1.1\r\n"
                            "Host: example.com:8080\r\n"
                            "User-Agent: test\r\n"
                            "Cookie: a=1; b=2\r\n"
                            "X-Multi: one\r\n"
                            "x-multi: two  \r\n"
                            "\r\n";

const std::string post_req = "POST /submit HTTP/1.1\r\n"
                             "Host: h\r\n"
                             "Content-Type: text/plain\r\n"
                             "Content-Length: 11\r\n"
                             "\r\n"
                             "hello world";

const std::string chunked_req = "POST /c HTTP/1.1\r\n"
                                "Host: h\r\n"
                                "Transfer-Encoding: chunked\r\n"
                                "\r\n"
                                "5\r\nhello\r\n"
                                "6;ext=1\r\n world\r\n"
                                "0\r\n"
                                "Trailer-X: y\r\n"
                                "\r\n";

void expect_get(const Request &r)
{
    EXPECT_EQ(r.method, "GET");
    EXPECT_EQ(r.target, "/path/x?a=1&b=%20");
    EXPECT_EQ(r.version_major, 1);
    EXPECT_EQ(r.version_minor, 1);
    ASSERT_EQ(r.headers.size(), 5u);
    EXPECT_EQ(r.headers[0].first, "Host");
    EXPECT_EQ(r.headers[0].second, "example.com:8080");
    EXPECT_EQ(r.headers[4].first, "x-multi");
    EXPECT_EQ(r.headers[4].second, "two"); // trailing whitespace trimmed
    EXPECT_EQ(r.header("COOKIE"), "a=1; b=2");
    EXPECT_TRUE(r.keep_alive);
    EXPECT_TRUE(r.body.empty());
}

} // namespace

TEST(HttpParser, ParsesGetWhole)
{
    auto o = feed(get_req, get_req.size());
    ASSERT_EQ(o.error, 0) << o.error_message;
    ASSERT_EQ(o.requests.size(), 1u);
    expect_get(o.requests[0]);
}

TEST(HttpParser, EveryByteBoundaryGivesTheSameRequests)
{
    const std::string all = get_req + post_req + chunked_req + get_req;
    for (std::size_t step : {1u, 2u, 3u, 7u, 13u, 64u}) {
        SCOPED_TRACE("step " + std::to_string(step));
        auto o = feed(all, step);
        ASSERT_EQ(o.error, 0) << o.error_message;
        ASSERT_EQ(o.requests.size(), 4u);
        expect_get(o.requests[0]);
        EXPECT_EQ(o.requests[1].method, "POST");
        EXPECT_EQ(o.requests[1].body, "hello world");
        EXPECT_EQ(o.requests[2].body, "hello world");
        EXPECT_TRUE(o.requests[2].chunked);
        expect_get(o.requests[3]);
    }
    // Split once at every position.
    for (std::size_t cut = 1; cut < all.size(); ++cut) {
        HttpParser p({});
        std::vector<Request> got;
        for (auto part : {all.substr(0, cut), all.substr(cut)}) {
            auto buf = p.prepare(part.size());
            std::memcpy(buf.data(), part.data(), part.size());
            p.commit(part.size());
            for (;;) {
                auto ev = p.next();
                if (ev == Event::request) {
                    got.push_back(p.request());
                    p.done();
                } else if (ev != Event::head) {
                    ASSERT_EQ(ev, Event::need_more) << "cut " << cut;
                    break;
                }
            }
        }
        ASSERT_EQ(got.size(), 4u) << "cut " << cut;
        EXPECT_EQ(got[2].body, "hello world") << "cut " << cut;
        EXPECT_EQ(got[3].target, "/path/x?a=1&b=%20") << "cut " << cut;
    }
}

TEST(HttpParser, HeaderLargerThanTheInitialBufferSurvivesCompaction)
{
    std::string big(20000, 'v');
    std::string req =
        post_req + "GET /second HTTP/1.1\r\nHost: h\r\nX-Big: " + big + "\r\nX-After: ok\r\n\r\n";
    for (std::size_t step : {1u, 100u, 4096u}) {
        auto o = feed(req, step);
        ASSERT_EQ(o.error, 0) << o.error_message;
        ASSERT_EQ(o.requests.size(), 2u);
        EXPECT_EQ(o.requests[1].target, "/second");
        EXPECT_EQ(o.requests[1].header("X-Big"), big);
        EXPECT_EQ(o.requests[1].header("X-After"), "ok");
    }
}

namespace {
// Feeds `data` to `p` in 1000-byte reads until it asks for no more or fails; the last event.
Event feed_into(HttpParser &p, const std::string &data)
{
    std::size_t pos = 0;
    for (;;) {
        Event ev = p.next();
        if (ev != Event::need_more || pos == data.size())
            return ev;
        auto buf = p.prepare();
        std::size_t n = std::min({buf.size(), data.size() - pos, std::size_t{1000}});
        std::memcpy(buf.data(), data.data() + pos, n);
        p.commit(n);
        pos += n;
    }
}
} // namespace

TEST(HttpParser, ReceiveBufferGrowthTakesFromTheHeadBudget)
{
    // Issue 41: a head larger than the first buffer (8 KiB) grows it from http.limits.max_head_memory, all
    // connections together; a connection that cannot get memory is answered 503 instead of growing the
    // process.
    ferry::Budget budget(40 * 1024);
    const std::string head = "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(20000, 'v') + "\r\n";
    {
        HttpParser p({});
        p.set_buffer_budget(&budget);
        ASSERT_EQ(feed_into(p, head + "\r\n"), Event::head);
        EXPECT_GT(budget.used(), 0u) << "the grown buffer is held from the budget";
        ASSERT_EQ(p.next(), Event::request);
        p.done();
        EXPECT_EQ(p.next(), Event::need_more);
        EXPECT_EQ(budget.used(), 0u) << "given back once the connection is idle";
    }
    HttpParser a({});
    a.set_buffer_budget(&budget);
    ASSERT_EQ(feed_into(a, head), Event::need_more); // unfinished: its buffer stays grown
    const std::uint64_t held = budget.used();
    EXPECT_GE(held, 20000u - 8192u);
    {
        HttpParser b({});
        b.set_buffer_budget(&budget);
        EXPECT_EQ(feed_into(b, head), Event::error);
        EXPECT_EQ(b.error_status(), 503);
        EXPECT_TRUE(b.buffer_refused());
        EXPECT_NE(b.error_message().find("http.limits.max_head_memory"), std::string::npos)
            << b.error_message();
        EXPECT_LE(budget.used(), budget.limit()) << "never past the budget";
    }
    EXPECT_EQ(budget.used(), held) << "the refused connection gave back what it held";
    EXPECT_FALSE(a.buffer_refused());
}

TEST(HttpParser, PipelinedRequestsComeOneAtATime)
{
    HttpParser p({});
    std::string two = get_req + post_req;
    auto buf = p.prepare(two.size());
    std::memcpy(buf.data(), two.data(), two.size());
    p.commit(two.size());
    ASSERT_EQ(p.next(), Event::head);
    ASSERT_EQ(p.next(), Event::request);
    EXPECT_EQ(p.request().method, "GET");
    EXPECT_TRUE(p.has_buffered());
    ASSERT_EQ(p.next(), Event::request) << "the same request until done()";
    p.done();
    ASSERT_EQ(p.next(), Event::head);
    ASSERT_EQ(p.next(), Event::request);
    EXPECT_EQ(p.request().method, "POST");
    p.done();
    EXPECT_EQ(p.next(), Event::need_more);
    EXPECT_TRUE(p.idle());
}

TEST(HttpParser, HeaderTooLargeIs431)
{
    Limits l;
    l.max_header_size = 1024;
    std::string req = "GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(2000, 'a') + "\r\n\r\n";
    for (std::size_t step : {1u, 10000u}) {
        auto o = feed(req, step, l);
        EXPECT_EQ(o.error, 431);
        EXPECT_TRUE(o.requests.empty());
    }
    // An unfinished header that keeps growing is cut off too.
    auto o = feed("GET / HTTP/1.1\r\nHost: h\r\nX-Long: " + std::string(5000, 'a'), 100, l);
    EXPECT_EQ(o.error, 431);
}

TEST(HttpParser, BodyOverLimitIs413BeforeTheBody)
{
    Limits l;
    l.max_body_size = 10;
    HttpParser p(l);
    std::string head = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n";
    auto buf = p.prepare(head.size());
    std::memcpy(buf.data(), head.data(), head.size());
    p.commit(head.size());
    EXPECT_EQ(p.next(), Event::error);
    EXPECT_EQ(p.error_status(), 413);
    EXPECT_NE(p.error_message().find("max_request_size"), std::string::npos);

    auto o = feed("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
                  "chunked\r\n\r\n6\r\n123456\r\n6\r\n123456\r\n0\r\n\r\n",
                  5, l);
    EXPECT_EQ(o.error, 413);
    auto ok = feed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789", 3, l);
    ASSERT_EQ(ok.error, 0);
    EXPECT_EQ(ok.requests.at(0).body, "0123456789");
}

TEST(HttpParser, MalformedAndSmugglingAttemptsAre400)
{
    const char *bad[] = {
        "GARBAGE\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "GET / HTTP/1.1\r\n\r\n", // HTTP/1.1 needs Host
        "GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n",
    };
    for (const char *r : bad) {
        for (std::size_t step : {1u, 1000u}) {
            auto o = feed(r, step);
            EXPECT_EQ(o.error, 400) << r;
            EXPECT_FALSE(o.error_message.empty()) << r;
        }
    }
}

TEST(HttpParser, KeepAliveRules)
{
    auto ka = [](const std::string &r) {
        auto o = feed(r, r.size());
        EXPECT_EQ(o.requests.size(), 1u) << r;
        return o.requests.empty() ? false : o.requests[0].keep_alive;
    };
    EXPECT_TRUE(ka("GET / HTTP/1.1\r\nHost: h\r\n\r\n"));
    EXPECT_FALSE(ka("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
    EXPECT_FALSE(ka("GET / HTTP/1.0\r\n\r\n"));
    EXPECT_TRUE(ka("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
}

TEST(HttpParser, TheHeadIsReportedOnceBeforeTheBody)
{
    std::string head = "PUT /u HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    HttpParser p({});
    auto buf = p.prepare(head.size());
    std::memcpy(buf.data(), head.data(), head.size());
    p.commit(head.size());
    EXPECT_EQ(p.next(), Event::head);
    EXPECT_TRUE(p.request().expect_continue);
    EXPECT_FALSE(p.has_buffered());
    EXPECT_EQ(p.next(), Event::need_more);
    EXPECT_TRUE(p.in_body());
    buf = p.prepare(4);
    std::memcpy(buf.data(), "data", 4);
    p.commit(4);
    ASSERT_EQ(p.next(), Event::request);
    EXPECT_EQ(p.request().body, "data");
    // Without a pending body there is nothing to continue.
    auto o = feed("GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n", 1000);
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_FALSE(o.requests[0].expect_continue);
    EXPECT_EQ(o.heads, 1);
}

TEST(HttpParser, UpgradeIsServedThenClosed)
{
    auto o = feed("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 1000);
    ASSERT_EQ(o.requests.size(), 1u);
    EXPECT_TRUE(o.requests[0].upgrade);
    EXPECT_FALSE(o.requests[0].keep_alive);
}

TEST(HttpParser, ObsoleteLineFoldingAndDuplicateHostAre400)
{
    for (std::size_t step : {1u, 1000u}) {
        auto o = feed("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b\r\n\r\n", step);
        EXPECT_EQ(o.error, 400);
        EXPECT_NE(o.error_message.find("folding"), std::string::npos) << o.error_message;
        auto d = feed("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", step);
        EXPECT_EQ(d.error, 400);
        EXPECT_NE(d.error_message.find("Host"), std::string::npos);
    }
}

TEST(HttpParser, TooManyHeadersIs431)
{
    Limits l;
    l.max_headers = 10;
    std::string req = "GET / HTTP/1.1\r\nHost: h\r\n";
    for (int i = 0; i < 10; ++i)
        req += "X-" + std::to_string(i) + ": v\r\n";
    auto o = feed(req + "\r\n", 7, l);
    EXPECT_EQ(o.error, 431);
    EXPECT_NE(o.error_message.find("more than 10"), std::string::npos) << o.error_message;
    l.max_headers = 11;
    auto ok = feed(req + "\r\n", 7, l);
    EXPECT_EQ(ok.error, 0);
    EXPECT_EQ(ok.requests.size(), 1u);
}
