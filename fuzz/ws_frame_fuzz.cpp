// ws::FrameParser: client frames parsed from one buffer and again from small pieces (each piece in its own
// buffer, reused as a server's read buffer is) give the same events; a text message or a close reason is
// valid UTF-8; the parser's memory stays within the message limit.
#include "fuzz_util.hpp"

#include "ws/frame.hpp"
#include "ws/utf8.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace {

namespace ws = ferry::server::detail::ws;

struct Ev {
    ws::FrameEvent event;
    ws::Opcode type;
    std::string payload;
    std::uint16_t close_code, error_code;
    bool operator==(const Ev &) const = default;
};

void record(const ws::Parsed &r, const ws::Limits &limits, std::vector<Ev> &out)
{
    if (r.event == ws::FrameEvent::message)
        FUZZ_CHECK(r.payload.size() <= limits.max_message);
    if (r.event == ws::FrameEvent::message && r.type == ws::Opcode::text && !r.compressed)
        FUZZ_CHECK(ws::valid_utf8(r.payload));
    if (r.event == ws::FrameEvent::close) {
        FUZZ_CHECK(ws::valid_utf8(r.close_reason));
        FUZZ_CHECK(r.close_code == ws::close_status::no_status || ws::valid_close_code(r.close_code));
    }
    if (r.event == ws::FrameEvent::ping || r.event == ws::FrameEvent::pong ||
        r.event == ws::FrameEvent::close)
        FUZZ_CHECK(r.payload.size() <= 125); // a control frame's own limit, whatever max_message is
    if (r.event == ws::FrameEvent::error)
        FUZZ_CHECK(r.error_code == 1002 || r.error_code == 1007 || r.error_code == 1009);
    out.push_back({r.event, r.type, std::string(r.payload), r.close_code, r.error_code});
}

std::vector<Ev> run(std::string_view stream, std::size_t step, const ws::Limits &limits, bool release)
{
    ws::FrameParser p(limits);
    std::vector<Ev> evs;
    std::vector<char> buf;
    for (std::size_t pos = 0; pos < stream.size();) {
        std::size_t n = step == 0 ? stream.size() - pos : std::min(step, stream.size() - pos);
        buf.assign(stream.begin() + pos, stream.begin() + pos + n);
        pos += n;
        std::span<char> in(buf);
        for (;;) {
            ws::Parsed r = p.parse(in);
            FUZZ_CHECK(r.consumed <= in.size());
            if (r.event == ws::FrameEvent::need_more) {
                FUZZ_CHECK(r.consumed == in.size());
                break;
            }
            record(r, limits, evs);
            if (r.event == ws::FrameEvent::error)
                return evs;
            in = in.subspan(r.consumed);
            if (release)
                p.release_memory();
            // The reassembly buffer holds at most one message (and a control frame).
            FUZZ_CHECK(p.memory() <= 2 * limits.max_message + 4096);
        }
    }
    return evs;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    fuzz::Input in(data, size);
    std::size_t step = fuzz::piece(in.byte());
    std::uint8_t opts = in.byte();
    ws::Limits limits;
    limits.allow_rsv1 = opts & 1;
    if (opts & 2)
        limits.max_message = 100;
    std::vector<Ev> whole = run(in.rest(), 0, limits, false);
    std::vector<Ev> parts = run(in.rest(), step == 0 ? 1 : step, limits, opts & 4);
    FUZZ_CHECK(whole == parts);
    return 0;
}
