#include "http/response.hpp"

#include <gtest/gtest.h>

using namespace ferry::server::detail;
using ferry::relay::HeaderField;
using ferry::relay::ResponseContext;

namespace {
std::string head_of(const Head &h, int *dropped = nullptr)
{
    std::string out;
    append_head(out, h, dropped);
    return out;
}
} // namespace

TEST(Response, StatusLineDateServerAndLength)
{
    ResponseContext rc;
    rc.status = 201;
    rc.headers = {HeaderField{"Content-Type", {"text/plain"}}};
    Head h;
    h.status = 201;
    h.worker = &rc;
    h.content_length = 5;
    std::string s = head_of(h);
    EXPECT_EQ(s.rfind("HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nServer: ferry\r\nDate: ", 0), 0u)
        << s;
    EXPECT_NE(s.find("\r\nContent-Length: 5\r\n\r\n"), std::string::npos) << s;
    EXPECT_EQ(s.find("Connection:"), std::string::npos);
    EXPECT_EQ(http_date().size(), 29u);
}

TEST(Response, SetCookieLinesStaySeparate)
{
    ResponseContext rc;
    rc.headers = {HeaderField{"Set-Cookie", {"a=1", "b=2; Path=/"}}};
    Head h;
    h.worker = &rc;
    std::string s = head_of(h);
    EXPECT_NE(s.find("Set-Cookie: a=1\r\nSet-Cookie: b=2; Path=/\r\n"), std::string::npos) << s;
}

TEST(Response, InjectionAndHopByHopHeadersAreDropped)
{
    ResponseContext rc;
    rc.headers = {HeaderField{"X-Ok", {"fine"}},
                  HeaderField{"X-Bad", {"a\r\nInjected: yes"}},
                  HeaderField{"Bad Name", {"x"}},
                  HeaderField{"Content-Length", {"999"}},
                  HeaderField{"Transfer-Encoding", {"chunked"}},
                  HeaderField{"Connection", {"upgrade"}},
                  HeaderField{"Server", {"php"}}};
    Head h;
    h.worker = &rc;
    h.content_length = 2;
    int dropped = 0;
    std::string s = head_of(h, &dropped);
    EXPECT_EQ(dropped, 2);
    EXPECT_EQ(s.find("Injected"), std::string::npos);
    EXPECT_EQ(s.find("999"), std::string::npos);
    EXPECT_EQ(s.find("chunked"), std::string::npos);
    EXPECT_EQ(s.find("upgrade"), std::string::npos);
    EXPECT_NE(s.find("X-Ok: fine\r\n"), std::string::npos);
    EXPECT_NE(s.find("Server: php\r\n"), std::string::npos);
    EXPECT_EQ(s.find("Server: ferry"), std::string::npos) << "the app's Server header wins";
    EXPECT_NE(s.find("Content-Length: 2\r\n"), std::string::npos);
}

TEST(Response, FramingAndConnection)
{
    Head h;
    h.framing = Framing::chunked;
    EXPECT_NE(head_of(h).find("Transfer-Encoding: chunked\r\n"), std::string::npos);
    h.framing = Framing::none;
    h.status = 204;
    std::string s = head_of(h);
    EXPECT_EQ(s.find("Content-Length"), std::string::npos);
    h = Head{};
    h.keep_alive = false;
    EXPECT_NE(head_of(h).find("Connection: close\r\n"), std::string::npos);
    h = Head{};
    h.http10 = true;
    EXPECT_NE(head_of(h).find("Connection: keep-alive\r\n"), std::string::npos);
}

TEST(Response, ErrorBodyNamesTheCause)
{
    std::string out;
    append_error(out, 503, "no free worker within allocate_timeout (500 ms)", false, false);
    EXPECT_EQ(out.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u);
    EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
    EXPECT_NE(out.find("\r\n\r\n503 Service Unavailable: no free worker within allocate_timeout (500 ms)\n"),
              std::string::npos)
        << out;
    std::string head_only;
    append_error(head_only, 500, "", true, true);
    EXPECT_EQ(head_only.substr(head_only.size() - 4), "\r\n\r\n");
    EXPECT_NE(head_only.find("Content-Length: 26\r\n"), std::string::npos) << head_only;
}
