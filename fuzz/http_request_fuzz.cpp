// HttpParser: the request head scanner, the llhttp adapter and the body framing (Content-Length and the
// chunked decoder), fed one stream of bytes whole and again in small pieces: both must give the same
// requests (method, target, headers, body) and the same error status.
#include "fuzz_util.hpp"

#include "ferry/server/http_parser.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace {

using ferry::server::HttpParser;
using Event = HttpParser::Event;

struct Outcome {
    std::vector<ferry::server::Request> requests;
    int error = 0;
    std::string message;
};

Outcome feed(std::string_view data, std::size_t step, const ferry::server::Limits &limits)
{
    HttpParser p(limits);
    Outcome o;
    std::size_t pos = 0;
    for (std::size_t guard = 0; guard < 4 * data.size() + 64; ++guard) {
        Event ev = p.next();
        if (ev == Event::request) {
            FUZZ_CHECK(!p.in_body());
            o.requests.push_back(p.request());
            p.done();
            if (guard % 3 == 0 && p.idle())
                p.release_memory();
            continue;
        }
        if (ev == Event::head)
            continue;
        if (ev == Event::error) {
            o.error = p.error_status();
            o.message = p.error_message();
            FUZZ_CHECK(o.error >= 400 && o.error <= 599);
            FUZZ_CHECK(!p.error_message().empty());
            return o;
        }
        if (pos >= data.size())
            return o;
        std::size_t n = step == 0 ? data.size() - pos : std::min(step, data.size() - pos);
        auto buf = p.prepare(n);
        FUZZ_CHECK(buf.size() >= n);
        std::memcpy(buf.data(), data.data() + pos, n);
        p.commit(n);
        pos += n;
        // A parser never holds much more than the limits allow plus what it was given.
        FUZZ_CHECK(p.buffer_capacity() <= 2 * (limits.max_header_size + data.size()) + 65536);
    }
    std::fprintf(stderr, "the parser did not make progress\n");
    std::abort();
    return o;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    fuzz::Input in(data, size);
    std::size_t step = fuzz::piece(in.byte());
    std::uint8_t l = in.byte();
    ferry::server::Limits limits;
    if (l & 1) { // small limits, to reach their checks
        limits.max_request_line = 64;
        limits.max_header_size = 256;
        limits.max_body_size = 64;
        limits.max_headers = 4;
    }
    std::string_view stream = in.rest();
    Outcome whole = feed(stream, 0, limits);
    Outcome parts = feed(stream, step == 0 ? 1 : step, limits);
    if (whole.error != parts.error)
        std::fprintf(stderr, "whole: %d %s; in pieces of %zu: %d %s\n", whole.error, whole.message.c_str(),
                     step == 0 ? 1 : step, parts.error, parts.message.c_str());
    FUZZ_CHECK(whole.error == parts.error);
    FUZZ_CHECK(whole.requests.size() == parts.requests.size());
    for (std::size_t i = 0; i < whole.requests.size(); ++i) {
        const auto &a = whole.requests[i], &b = parts.requests[i];
        FUZZ_CHECK(a.method == b.method && a.target == b.target && a.headers == b.headers);
        FUZZ_CHECK(a.body == b.body && a.keep_alive == b.keep_alive && a.chunked == b.chunked);
        FUZZ_CHECK(a.body.size() <= limits.max_body_size);
    }
    return 0;
}
