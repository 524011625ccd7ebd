// compress/: the encoders (gzip by zlib and libdeflate, brotli) decoded back by zlib's and brotli's own
// decoders — whole, and streamed with each flush decodable at once; which responses are compressed (plan());
// and the head a compressed response gets (Content-Encoding, weak ETag, Vary).
#include "compress/encoder.hpp"
#include "compress/policy.hpp"
#include "http/response.hpp"
#include "static/compressed_cache.hpp"

#include <brotli/decode.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <string>

namespace c = ferry::server::detail::compress;
using c::Coding;
using Flush = c::Encoder::Flush;

namespace {

// Text with some repetition and some noise, like a JSON answer.
std::string sample(std::size_t n)
{
    std::mt19937 rng(7);
    std::string s;
    static const char *words[] = {"{\"id\":", "\"name\":\"ferry\",", "\"tags\":[\"php\",\"http\"],",
                                  "true},"};
    while (s.size() < n) {
        s += words[rng() % 4];
        s += std::to_string(rng() % 100000);
    }
    s.resize(n);
    return s;
}

// An incremental gzip decoder: what feed() gives back is all that the bytes so far decode to.
struct Gunzip {
    z_stream z{};
    bool ended = false;
    Gunzip() { EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK); }
    ~Gunzip() { inflateEnd(&z); }
    std::string feed(std::string_view in)
    {
        std::string out;
        z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(in.data()));
        z.avail_in = static_cast<uInt>(in.size());
        char buf[16384];
        for (;;) {
            z.next_out = reinterpret_cast<Bytef *>(buf);
            z.avail_out = sizeof buf;
            const int rc = inflate(&z, Z_SYNC_FLUSH);
            out.append(buf, sizeof buf - z.avail_out);
            if (rc == Z_STREAM_END) {
                ended = true;
                break;
            }
            if (rc == Z_BUF_ERROR || (z.avail_in == 0 && z.avail_out > 0))
                break;
            EXPECT_EQ(rc, Z_OK);
            if (rc != Z_OK)
                break;
        }
        return out;
    }
};

struct Unbrotli {
    BrotliDecoderState *s = BrotliDecoderCreateInstance(nullptr, nullptr, nullptr);
    bool ended = false;
    ~Unbrotli() { BrotliDecoderDestroyInstance(s); }
    std::string feed(std::string_view in)
    {
        std::string out;
        std::size_t avail_in = in.size();
        const auto *next_in = reinterpret_cast<const std::uint8_t *>(in.data());
        for (;;) {
            std::size_t avail_out = 0;
            const auto rc =
                BrotliDecoderDecompressStream(s, &avail_in, &next_in, &avail_out, nullptr, nullptr);
            std::size_t n = 0;
            const std::uint8_t *p = BrotliDecoderTakeOutput(s, &n);
            out.append(reinterpret_cast<const char *>(p), n);
            if (rc == BROTLI_DECODER_RESULT_SUCCESS) {
                ended = true;
                break;
            }
            EXPECT_NE(rc, BROTLI_DECODER_RESULT_ERROR);
            if (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT || rc == BROTLI_DECODER_RESULT_ERROR)
                break;
        }
        return out;
    }
};

template <typename Decoder> void streams_decodable_at_each_flush(Coding coding, int level)
{
    const std::string text = sample(300'000);
    c::Encoder e(coding, level);
    Decoder d;
    std::string decoded;
    std::size_t at = 0;
    for (std::size_t piece : {1u, 100u, 5000u, 70000u, 100000u}) {
        std::string out;
        ASSERT_TRUE(e.write(std::string_view(text).substr(at, piece), Flush::sync, out));
        at += piece;
        decoded += d.feed(out);
        EXPECT_EQ(decoded, text.substr(0, at)) << "everything flushed decodes at once";
    }
    std::string out;
    ASSERT_TRUE(e.write(std::string_view(text).substr(at, 10000), Flush::none, out));
    ASSERT_TRUE(e.write(std::string_view(text).substr(at + 10000), Flush::finish, out));
    decoded += d.feed(out);
    EXPECT_TRUE(d.ended);
    EXPECT_EQ(decoded, text);
}

} // namespace

TEST(Compress, GzipStreamIsDecodableAtEachFlushAndEndsAsGzip)
{
    streams_decodable_at_each_flush<Gunzip>(Coding::gzip, 1);
    streams_decodable_at_each_flush<Gunzip>(Coding::gzip, 9);
}

TEST(Compress, BrotliStreamIsDecodableAtEachFlushAndEnds)
{
    streams_decodable_at_each_flush<Unbrotli>(Coding::br, 4);
    streams_decodable_at_each_flush<Unbrotli>(Coding::br, 0);
}

TEST(Compress, WholeBodiesRoundTripAndShrink)
{
    for (std::size_t n : {0u, 1u, 1000u, 20'000u, 65'536u, 1'000'000u}) {
        const std::string text = sample(n);
        std::string out;
        ASSERT_TRUE(c::compress_whole(Coding::gzip, 1, text, out));
        Gunzip g;
        EXPECT_EQ(g.feed(out), text) << n;
        EXPECT_TRUE(g.ended);
        ASSERT_TRUE(c::compress_whole(Coding::br, 4, text, out));
        Unbrotli b;
        EXPECT_EQ(b.feed(out), text) << n;
        EXPECT_TRUE(b.ended);
        if (n >= 20'000) {
            EXPECT_LT(out.size(), n / 2) << n;
        }
    }
    // The encoder reused for the next body starts afresh (libdeflate's per thread; zlib's after reset()).
    std::string a, b;
    ASSERT_TRUE(c::compress_whole(Coding::gzip, 6, sample(5000), a));
    ASSERT_TRUE(c::compress_whole(Coding::gzip, 6, sample(5000), b));
    EXPECT_EQ(a, b);
    c::Encoder e(Coding::gzip, 5);
    std::string first, second;
    ASSERT_TRUE(e.write(sample(3000), Flush::finish, first));
    e.reset();
    ASSERT_TRUE(e.write(sample(3000), Flush::finish, second));
    EXPECT_EQ(first, second);
}

namespace {

struct PlanCase : ::testing::Test {
    ferry::conf::CompressionConfig config;
    ferry::server::Request req;
    ferry::relay::ResponseContext rc;

    PlanCase()
    {
        config.enabled = true;
        req.method = "GET";
        req.headers = {{"Accept-Encoding", "gzip, deflate, br"}};
        rc.headers = {{"Content-Type", {"application/json; charset=utf-8"}}};
    }
    c::Plan plan(int status = 200, std::optional<std::size_t> size = 20000)
    {
        return c::plan(config, req, rc, status, size);
    }
    void accept(std::string v) { req.headers = {{"accept-encoding", std::move(v)}}; }
};

} // namespace

TEST_F(PlanCase, GzipOnATieBrotliWhenRankedHigherOrPreferred)
{
    EXPECT_EQ(plan().coding, Coding::gzip);
    EXPECT_TRUE(plan().vary);
    config.prefer = "br";
    EXPECT_EQ(plan().coding, Coding::br);
    config.prefer = "gzip";
    accept("gzip;q=0.5, br");
    EXPECT_EQ(plan().coding, Coding::br);
    config.brotli = false;
    EXPECT_EQ(plan().coding, Coding::gzip);
    config.brotli = true;
    accept("br;q=0, gzip");
    EXPECT_EQ(plan().coding, Coding::gzip);
    accept("br");
    EXPECT_EQ(plan().coding, Coding::br);
    accept("x-gzip");
    EXPECT_EQ(plan().coding, Coding::gzip);
    accept("*");
    EXPECT_EQ(plan().coding, Coding::gzip);
    accept("*;q=0");
    EXPECT_EQ(plan().coding, Coding::identity);
    EXPECT_TRUE(plan().vary) << "another client would get it compressed";
    accept("identity");
    EXPECT_EQ(plan().coding, Coding::identity);
    req.headers.clear();
    EXPECT_EQ(plan().coding, Coding::identity);
    EXPECT_TRUE(plan().vary);
}

TEST_F(PlanCase, NeverWhenTheResponseOrRequestRulesItOut)
{
    config.enabled = false;
    EXPECT_FALSE(plan().vary);
    config.enabled = true;
    for (int status : {101, 204, 206, 304})
        EXPECT_EQ(plan(status).coding, Coding::identity) << status;
    for (int status : {201, 404, 500})
        EXPECT_EQ(plan(status).coding, Coding::gzip) << status;
    req.method = "HEAD";
    EXPECT_EQ(plan().coding, Coding::identity);
    req.method = "GET";
    EXPECT_EQ(plan(200, 1023).coding, Coding::identity) << "below min_length";
    EXPECT_FALSE(plan(200, 1023).vary);
    EXPECT_EQ(plan(200, 1024).coding, Coding::gzip);
    EXPECT_EQ(plan(200, std::nullopt).coding, Coding::gzip) << "a stream has no length to compare";

    const auto with = [&](std::string name, std::string value) {
        ferry::relay::ResponseContext saved = rc;
        rc.headers.push_back({std::move(name), {std::move(value)}});
        const c::Plan p = plan();
        rc = saved;
        return p;
    };
    EXPECT_EQ(with("Content-Encoding", "br").coding, Coding::identity);
    EXPECT_EQ(with("Content-Range", "bytes 0-9/100").coding, Coding::identity);
    EXPECT_EQ(with("Cache-Control", "public, No-Transform").coding, Coding::identity);
    EXPECT_EQ(with("Cache-Control", "public, max-age=60").coding, Coding::gzip);
}

TEST_F(PlanCase, MediaTypesAreMatchedWithoutParametersAndByWholeType)
{
    for (const char *t : {"text/html", "TEXT/HTML; charset=utf-8", "image/svg+xml", " application/json "})
        EXPECT_TRUE(c::type_listed(config.types, t)) << t;
    for (const char *t : {"image/png", "application/octet-stream", "text/event-stream", "", "json", "text"})
        EXPECT_FALSE(c::type_listed(config.types, t)) << t;
    EXPECT_TRUE(c::type_listed({"text/*"}, "text/event-stream"));
    EXPECT_FALSE(c::type_listed({"text/*"}, "texts/x"));
    rc.headers = {{"Content-Type", {"image/png"}}};
    EXPECT_EQ(plan().coding, Coding::identity);
    EXPECT_FALSE(plan().vary);
    rc.headers.clear(); // no Content-Type: unknown bytes, left alone
    EXPECT_EQ(plan().coding, Coding::identity);
}

TEST(CompressHead, EncodingWeakEtagAndOneVary)
{
    using namespace ferry::server::detail;
    ferry::relay::ResponseContext rc;
    rc.headers = {{"ETag", {"\"v1\""}}, {"Vary", {"Cookie"}}, {"Content-Type", {"text/html"}}};
    Head h;
    h.worker = &rc;
    h.content_encoding = "gzip";
    h.vary_accept_encoding = true;
    h.content_length = 10;
    std::string out;
    append_head(out, h);
    EXPECT_NE(out.find("\r\nETag: W/\"v1\"\r\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\nContent-Encoding: gzip\r\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\nVary: Cookie\r\n"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\nVary: Accept-Encoding\r\n"), std::string::npos) << out;

    rc.headers = {{"ETag", {"W/\"v2\""}}, {"Vary", {"Cookie, accept-encoding"}}};
    out.clear();
    append_head(out, h);
    EXPECT_NE(out.find("\r\nETag: W/\"v2\"\r\n"), std::string::npos) << "already weak: " << out;
    EXPECT_EQ(out.find("Vary: Accept-Encoding"), std::string::npos) << "named already: " << out;

    rc.headers = {{"ETag", {"\"v3\""}}, {"Vary", {"*"}}};
    h.content_encoding = {}; // not compressed (this client did not accept it): the tag stays strong
    out.clear();
    append_head(out, h);
    EXPECT_NE(out.find("\r\nETag: \"v3\"\r\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("Vary: Accept-Encoding"), std::string::npos) << "* covers it: " << out;
    EXPECT_EQ(out.find("Content-Encoding"), std::string::npos) << out;
}

// http.static.compress's cache: by path, coding and file version; least recently used out past the capacity;
// a body over a quarter of it not kept; one compression of a file at a time.
TEST(CompressedCache, VersionsLruBoundAndBusyMarks)
{
    using ferry::server::detail::CompressedCache;
    c::Counters counters;
    {
        CompressedCache cache(1000, &counters);
        const auto bytes = [](std::size_t n) { return std::string(n, 'x'); };
        cache.put("a.css", Coding::gzip, "\"v1\"", bytes(200));
        cache.put("a.css", Coding::br, "\"v1\"", bytes(150));
        ASSERT_NE(cache.find("a.css", Coding::gzip, "\"v1\""), nullptr);
        EXPECT_EQ(cache.find("a.css", Coding::gzip, "\"v1\"")->etag, "W/\"v1\"") << "sent weak";
        EXPECT_EQ(cache.find("a.css", Coding::gzip, "\"v1\"")->bytes.size(), 200u);
        EXPECT_EQ(cache.find("a.css", Coding::gzip, "\"v2\""), nullptr) << "another version";
        EXPECT_EQ(cache.find("a.css", Coding::gzip, "\"v1\""), nullptr) << "the old one was dropped";
        EXPECT_EQ(cache.bytes(), 150u);
        cache.put("b.css", Coding::gzip, "\"v1\"", bytes(250));
        cache.put("c.css", Coding::gzip, "\"v1\"", bytes(250));
        EXPECT_NE(cache.find("a.css", Coding::br, "\"v1\""), nullptr); // a is now the most recently used
        cache.put("d.css", Coding::gzip, "\"v1\"", bytes(250));
        cache.put("e.css", Coding::gzip, "\"v1\"", bytes(250)); // over 1000: b goes, the least recently used
        EXPECT_LE(cache.bytes(), 1000u);
        EXPECT_EQ(cache.find("b.css", Coding::gzip, "\"v1\""), nullptr);
        EXPECT_NE(cache.find("a.css", Coding::br, "\"v1\""), nullptr);
        EXPECT_NE(cache.find("e.css", Coding::gzip, "\"v1\""), nullptr);
        // over a quarter of 1000 (and the slack for incompressible files): given, not kept
        EXPECT_EQ(cache.put("big.css", Coding::gzip, "W/\"v1\"", bytes(1300))->etag, "W/\"v1\"");
        EXPECT_EQ(cache.find("big.css", Coding::gzip, "W/\"v1\""), nullptr);
        EXPECT_EQ(cache.max_file(), 250u) << "a quarter of the capacity";
        std::string metrics;
        counters.format(metrics);
        EXPECT_NE(metrics.find("ferry_static_compressed_bytes " + std::to_string(cache.bytes()) + "\n"),
                  std::string::npos)
            << metrics;
        EXPECT_TRUE(cache.start("a.css", Coding::gzip));
        EXPECT_FALSE(cache.start("a.css", Coding::gzip)) << "already being compressed";
        EXPECT_TRUE(cache.start("a.css", Coding::br));
        cache.done("a.css", Coding::gzip);
        EXPECT_TRUE(cache.start("a.css", Coding::gzip));
    }
    std::string metrics;
    counters.format(metrics);
    EXPECT_NE(metrics.find("ferry_static_compressed_bytes 0\n"), std::string::npos)
        << "given back at the end";
}
