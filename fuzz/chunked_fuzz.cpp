// ChunkedDecoder: a chunked body decoded whole and again in small pieces gives the same bytes, the same end
// and the same error; a step always consumes input or ends; the decoded size never passes the limit.
#include "fuzz_util.hpp"

#include "http/chunked_decoder.hpp"

#include <string>

namespace {

using ferry::server::ChunkedDecoder;

struct Outcome {
    std::string body;
    bool done = false;
    int error = 0;
    std::size_t used = 0;
};

Outcome decode(std::string_view in, std::size_t step, ChunkedDecoder::Limits limits)
{
    ChunkedDecoder d(limits);
    Outcome o;
    std::size_t pos = 0;
    while (pos < in.size() && !d.done() && !d.failed()) {
        std::size_t n = step == 0 ? in.size() - pos : std::min(step, in.size() - pos);
        std::string_view piece = in.substr(pos, n);
        while (!piece.empty() && !d.done() && !d.failed()) {
            auto s = d.step(piece);
            FUZZ_CHECK(s.used <= piece.size());
            FUZZ_CHECK(s.used > 0 || d.done() || d.failed());
            FUZZ_CHECK(s.data.size() <= s.used);
            if (!s.data.empty()) // the data is a part of the input
                FUZZ_CHECK(s.data.data() >= piece.data() &&
                           s.data.data() + s.data.size() <= piece.data() + s.used);
            o.body.append(s.data);
            piece.remove_prefix(s.used);
            pos += s.used;
        }
        if (piece.empty())
            continue;
        break;
    }
    o.done = d.done();
    o.error = d.error_status();
    o.used = pos;
    FUZZ_CHECK(d.body_size() == o.body.size());
    FUZZ_CHECK(o.body.size() <= limits.max_body);
    if (d.failed())
        FUZZ_CHECK(o.error >= 400 && o.error <= 499 && !d.error_message().empty());
    return o;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    fuzz::Input in(data, size);
    std::size_t step = fuzz::piece(in.byte());
    ChunkedDecoder::Limits limits;
    if (in.byte() & 1) {
        limits.max_body = 100;
        limits.max_size_line = 32;
        limits.max_trailers = 64;
    }
    Outcome whole = decode(in.rest(), 0, limits);
    Outcome parts = decode(in.rest(), step == 0 ? 1 : step, limits);
    FUZZ_CHECK(whole.body == parts.body);
    FUZZ_CHECK(whole.done == parts.done && whole.error == parts.error);
    if (whole.done) // the body ends at the same byte, however it arrived
        FUZZ_CHECK(whole.used == parts.used);
    return 0;
}
