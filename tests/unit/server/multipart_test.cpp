#include "forms/multipart.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using ferry::server::HttpError;
using ferry::server::HttpResult;
using ferry::server::detail::MultipartHandler;
using ferry::server::detail::MultipartParser;
using ferry::server::detail::PartHeaders;

namespace {

// Records the parts as "name|filename|type=data".
struct Recorder final : MultipartHandler {
    std::vector<std::string> parts;
    std::string current;
    bool open = false;
    HttpResult<void> part_begin(const PartHeaders &h) override
    {
        EXPECT_FALSE(open);
        open = true;
        current = h.name + "|" + (h.filename ? *h.filename : "-") + "|" + h.content_type + "=";
        return {};
    }
    HttpResult<void> part_data(std::string_view b) override
    {
        EXPECT_TRUE(open);
        current.append(b);
        return {};
    }
    HttpResult<void> part_end() override
    {
        EXPECT_TRUE(open);
        open = false;
        parts.push_back(current);
        return {};
    }
};

const std::string body = "preamble to ignore\r\n"
                         "--XyZ\r\n"
                         "Content-Disposition: form-data; name=\"a\"\r\n"
                         "\r\n"
                         "1\r\n"
                         "--XyZ\r\n"
                         "Content-Disposition: form-data; name=\"f\"; filename=\"x \\\"y\\\".txt\"\r\n"
                         "Content-Type: text/plain\r\n"
                         "\r\n"
                         "line one\r\n--XyZnot a boundary\r\n--Xy\r\nlast\r\n"
                         "--XyZ  \r\n"
                         "Content-Disposition: form-data; name=empty; filename=\"\"\r\n"
                         "\r\n"
                         "\r\n"
                         "--XyZ--\r\n"
                         "epilogue to ignore";

const std::vector<std::string> expected = {
    "a|-|=1",
    "f|x \"y\".txt|text/plain=line one\r\n--XyZnot a boundary\r\n--Xy\r\nlast",
    "empty||=",
};

// Feeds `data` cut at `cut` (and, with `step`, then in pieces of `step` bytes).
HttpResult<void> run(const std::string &data, Recorder &rec, std::size_t cut, std::size_t step = 0,
                     MultipartParser::Limits limits = {})
{
    MultipartParser p("XyZ", limits, rec);
    std::size_t pos = 0;
    auto feed = [&](std::size_t n) -> HttpResult<void> {
        auto r = p.feed(std::string_view(data).substr(pos, n));
        pos += n;
        return r;
    };
    if (auto r = feed(std::min(cut, data.size())); !r)
        return r;
    while (pos < data.size())
        if (auto r = feed(step ? std::min(step, data.size() - pos) : data.size() - pos); !r)
            return r;
    return p.finish();
}

} // namespace

TEST(Multipart, PartsAtEverySplitAndByteByByte)
{
    for (std::size_t cut = 0; cut <= body.size(); ++cut) {
        Recorder rec;
        auto r = run(body, rec, cut);
        ASSERT_TRUE(r.has_value()) << "cut " << cut << ": " << r.error().message;
        ASSERT_EQ(rec.parts, expected) << "cut " << cut;
    }
    Recorder rec;
    ASSERT_TRUE(run(body, rec, 0, 1).has_value());
    EXPECT_EQ(rec.parts, expected);
}

TEST(Multipart, BoundaryAtTheVeryStartAndNoPreamble)
{
    Recorder rec;
    std::string b = "--XyZ\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\nv\r\n--XyZ--";
    ASSERT_TRUE(run(b, rec, b.size()).has_value());
    EXPECT_EQ(rec.parts, std::vector<std::string>{"k|-|=v"});
}

TEST(Multipart, MalformedBodiesAre400)
{
    auto status = [](const std::string &b, MultipartParser::Limits l = {}) {
        Recorder rec;
        auto r = run(b, rec, b.size(), 0, l);
        return r ? 0 : r.error().status;
    };
    std::string part = "--XyZ\r\nContent-Disposition: form-data; name=\"k\"\r\n\r\nv\r\n";
    EXPECT_EQ(status(part), 400) << "no final boundary";
    EXPECT_EQ(status(part + "--XyZ"), 400) << "the final boundary cut short";
    EXPECT_EQ(status("--XyZ\r\nX-Other: 1\r\n\r\nv\r\n--XyZ--"), 400) << "no Content-Disposition";
    EXPECT_EQ(status("--XyZ\r\nContent-Disposition: attachment; name=k\r\n\r\nv\r\n--XyZ--"), 400);
    EXPECT_EQ(status("--XyZ\r\nbroken header\r\n\r\nv\r\n--XyZ--"), 400);
    EXPECT_EQ(status("--XyZjunk\r\nContent-Disposition: form-data; name=k\r\n\r\nv\r\n--XyZ--"), 0)
        << "not a boundary (more than padding after it): all preamble, no part";
    MultipartParser::Limits small;
    small.max_part_header = 64;
    EXPECT_EQ(status("--XyZ\r\nContent-Disposition: form-data; name=\"" + std::string(100, 'n') +
                         "\"\r\n\r\nv\r\n--XyZ--",
                     small),
              400);
    EXPECT_EQ(status("--XyZ\r\nContent-Disposition: form-data; name=\"" + std::string(100000, 'n'), small),
              400)
        << "an endless part header is cut off without waiting for its end";
    // A header block of exactly the limit, its CRLFCRLF arriving in another read: found by
    // fuzz/multipart_fuzz.cpp (byte by byte, the terminator's first bytes were counted as header: 400).
    const std::string exact =
        "--XyZ\r\nContent-Disposition: form-data; name=\"" + std::string(25, 'k') + "\"\r\n\r\nv\r\n--XyZ--";
    for (std::size_t step : {std::size_t(1), std::size_t(2), std::size_t(3), exact.size()}) {
        Recorder rec;
        auto r = run(exact, rec, 0, step, small);
        EXPECT_TRUE(r.has_value()) << "step " << step << ": " << (r ? "" : r.error().message);
        EXPECT_EQ(rec.parts, std::vector<std::string>{"kkkkkkkkkkkkkkkkkkkkkkkkk|-|=v"}) << "step " << step;
    }
    MultipartParser::Limits few;
    few.max_parts = 3;
    std::string many;
    for (int i = 0; i < 4; ++i)
        many += "--XyZ\r\nContent-Disposition: form-data; name=k\r\n\r\nv\r\n";
    EXPECT_EQ(status(many + "--XyZ--", few), 400);
    EXPECT_EQ(status(many + "--XyZ--"), 0);
}

TEST(Multipart, ThousandsOfTinyPartsAreBoundedByTheLimit)
{
    std::string b;
    for (int i = 0; i < 5000; ++i)
        b += "--XyZ\r\nContent-Disposition: form-data; name=a[]\r\n\r\nx\r\n";
    b += "--XyZ--";
    Recorder rec;
    auto r = run(b, rec, 1000, 4096);
    ASSERT_FALSE(r);
    EXPECT_EQ(rec.parts.size(), 1000u);
    EXPECT_NE(r.error().message.find("more than 1000 parts"), std::string::npos) << r.error().message;
}

TEST(Multipart, BoundaryParameter)
{
    using P = MultipartParser;
    EXPECT_EQ(P::boundary_of("multipart/form-data; boundary=abc"), "abc");
    EXPECT_EQ(P::boundary_of("Multipart/Form-Data; charset=utf-8; boundary=\"a b:c\""), "a b:c");
    EXPECT_EQ(P::boundary_of("multipart/form-data;boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW"),
              "----WebKitFormBoundary7MA4YWxkTrZu0gW");
    EXPECT_FALSE(P::boundary_of("multipart/form-data"));
    EXPECT_FALSE(P::boundary_of("multipart/form-data; boundary="));
    EXPECT_FALSE(P::boundary_of("multipart/form-data; boundary=" + std::string(71, 'a')));
    EXPECT_FALSE(P::boundary_of("multipart/form-data; boundary=\"a\rb\""));
    EXPECT_FALSE(P::boundary_of("multipart/mixed; boundary=abc"));
    EXPECT_TRUE(P::is_multipart(" multipart/form-data ; boundary=x"));
}
