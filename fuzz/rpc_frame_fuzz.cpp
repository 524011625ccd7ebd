// parse_rpc (the RPC listener's frame reader) over a stream of frames; each parsed message encoded again
// with encode_rpc parses back the same. With the first byte's low bit set, each header's CRC is fixed up.
#include "frame_stream.hpp"

#include "control/rpc_frame.hpp"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    namespace relay = ferry::relay;
    using namespace ferry::server::detail;
    fuzz::Input in(data, size);
    fuzz::FrameStream frames(in);
    const std::size_t max_payload = frames.max_payload;
    while (!frames.done()) {
        std::string_view avail = frames.next();
        RpcParse r = parse_rpc(avail, max_payload);
        if (r.status == relay::DecodeStatus::error) {
            FUZZ_CHECK(!r.error.empty());
            break;
        }
        if (r.status == relay::DecodeStatus::need_more) {
            FUZZ_CHECK(r.needed > avail.size());
            break;
        }
        FUZZ_CHECK(r.needed <= avail.size() && !r.message.method.empty());
        std::string again = encode_rpc(r.message.flags, r.message.seq, r.message.method, r.message.body);
        FUZZ_CHECK(again.size() == r.needed);
        RpcParse r2 = parse_rpc(again, max_payload);
        FUZZ_CHECK(r2.status == relay::DecodeStatus::ok && r2.needed == again.size());
        FUZZ_CHECK(r2.message.flags == r.message.flags && r2.message.seq == r.message.seq);
        FUZZ_CHECK(r2.message.method == r.message.method && r2.message.body == r.message.body);
        frames.advance(r.needed);
    }
    return 0;
}
