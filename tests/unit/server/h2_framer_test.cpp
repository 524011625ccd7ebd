// h2::Framer: the handlers' HTTP/1.1 answers (as http/response.cpp writes them) read back into an HTTP/2
// head, body bytes and the end — whole or split at every byte, with 1xx heads first, chunked or by length,
// HEAD, and anything that is not a response refused.
#include "h2/framer.hpp"
#include "http/body_stream.hpp"
#include "http/response.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using ferry::server::detail::h2::Framer;

namespace {

struct Recorder : Framer::Sink {
    std::vector<Framer::Head> heads;
    std::string body;
    int ends = 0;
    void on_head(Framer::Head &h) override { heads.push_back(h); }
    void on_data(std::string_view b) override { body.append(b); }
    std::vector<std::pair<std::string, std::string>> trailers;
    void on_trailers(std::vector<std::pair<std::string, std::string>> &t) override { trailers = t; }
    void on_end() override { ++ends; }
};

// Feeds `bytes` whole, then again one byte at a time: both must give the same.
Recorder feed(const std::string &bytes, bool head_request = false, bool *ok = nullptr)
{
    Recorder whole, split;
    Framer a, b;
    a.set_head_request(head_request);
    b.set_head_request(head_request);
    bool ok_whole = a.feed(bytes, whole), ok_split = true;
    for (char c : bytes)
        ok_split = ok_split && b.feed(std::string_view(&c, 1), split);
    EXPECT_EQ(ok_whole, ok_split);
    EXPECT_EQ(whole.body, split.body);
    EXPECT_EQ(whole.ends, split.ends);
    EXPECT_EQ(whole.heads.size(), split.heads.size());
    if (ok)
        *ok = ok_whole;
    return whole;
}

} // namespace

TEST(H2Framer, ALengthResponseBecomesAHeadWithLowerCaseFieldsWithoutHopByHop)
{
    std::string out;
    ferry::server::detail::append_text(out, 200, "hello", true, false, "X-Custom: Yes\r\n");
    out.insert(out.find("\r\n") + 2, "Connection: keep-alive\r\nKeep-Alive: timeout=5\r\n");
    auto r = feed(out);
    ASSERT_EQ(r.heads.size(), 1u);
    EXPECT_EQ(r.heads[0].status, 200);
    EXPECT_TRUE(r.heads[0].body);
    bool custom = false, length = false;
    for (auto &[n, v] : r.heads[0].fields) {
        EXPECT_NE(n, "connection");
        EXPECT_NE(n, "keep-alive");
        EXPECT_EQ(n, [&] {
            std::string l = n;
            for (char &c : l)
                c = static_cast<char>(std::tolower(c));
            return l;
        }());
        custom = custom || (n == "x-custom" && v == "Yes");
        length = length || (n == "content-length" && v == "5");
    }
    EXPECT_TRUE(custom);
    EXPECT_TRUE(length);
    EXPECT_EQ(r.body, "hello");
    EXPECT_EQ(r.ends, 1);
}

TEST(H2Framer, ChunkedBodiesLoseTheirFramingAndInformationalHeadsComeFirst)
{
    const std::string out =
        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
        "4\r\none\n\r\n"
        "a\r\n0123456789\r\n"
        "0\r\n\r\n";
    auto r = feed(out);
    ASSERT_EQ(r.heads.size(), 2u);
    EXPECT_EQ(r.heads[0].status, 103);
    EXPECT_EQ(r.heads[0].fields.at(0).first, "link");
    EXPECT_EQ(r.heads[1].status, 200);
    for (auto &[n, v] : r.heads[1].fields)
        EXPECT_NE(n, "transfer-encoding");
    EXPECT_EQ(r.body, "one\n0123456789");
    EXPECT_EQ(r.ends, 1);
}

TEST(H2Framer, HeadRequestsAnd204And304EndWithTheirHead)
{
    auto r = feed("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true);
    ASSERT_EQ(r.heads.size(), 1u);
    EXPECT_FALSE(r.heads[0].body);
    EXPECT_EQ(r.ends, 1);
    for (const char *s :
         {"HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"}) {
        auto n = feed(s);
        ASSERT_EQ(n.heads.size(), 1u);
        EXPECT_FALSE(n.heads[0].body);
        EXPECT_EQ(n.ends, 1);
    }
}

TEST(H2Framer, ABodyWithoutLengthRunsUntilItsWriterEnds)
{
    Framer f;
    Recorder r;
    ASSERT_TRUE(f.feed("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nabc", r));
    ASSERT_TRUE(f.feed("def", r));
    EXPECT_TRUE(f.until_end());
    EXPECT_FALSE(f.done());
    EXPECT_EQ(r.body, "abcdef");
}

TEST(H2Framer, WhatIsNotOurResponseIsRefused)
{
    for (const char *bad :
         {"garbage\r\n\r\n", "HTTP/1.1 abc OK\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
          "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"}) {
        bool ok = true;
        feed(bad, false, &ok);
        EXPECT_FALSE(ok) << bad;
    }
}

TEST(H2Framer, TrailersAfterTheLastChunkComeBeforeTheEnd)
{
    auto r = feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n"
                  "0\r\nX-Sum: 900150983cd24fb0\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(r.body, "abc");
    ASSERT_EQ(r.trailers.size(), 1u); // hop-by-hop left out there too
    EXPECT_EQ(r.trailers[0].first, "x-sum");
    EXPECT_EQ(r.trailers[0].second, "900150983cd24fb0");
    EXPECT_EQ(r.ends, 1);
}
