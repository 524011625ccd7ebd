// relay::decode_header over a stream of frames, as a worker's channel reads them (header, payload, next
// header), and each decoded header encoded again (encode_frame) and decoded back. With the first byte's low
// bit set, the CRC of each header is fixed up before decoding, so that inputs reach what follows the check.
#include "frame_stream.hpp"

#include "ferry/relay/frame.hpp"

#include <cstring>
#include <span>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    namespace relay = ferry::relay;
    fuzz::Input in(data, size);
    fuzz::FrameStream frames(in);
    const std::size_t max_payload = frames.max_payload;
    while (!frames.done()) {
        std::string_view avail = frames.next();
        relay::FrameHeader h;
        auto r = relay::decode_header(avail, h, max_payload);
        if (r.status == relay::DecodeStatus::error) {
            FUZZ_CHECK(!r.error.empty());
            break;
        }
        if (r.status == relay::DecodeStatus::need_more) {
            FUZZ_CHECK(r.needed > avail.size() && r.needed <= relay::max_header_size);
            break;
        }
        FUZZ_CHECK(h.option_count <= relay::max_options && h.payload_size <= max_payload);
        FUZZ_CHECK(r.needed == h.size() + h.payload_size);
        if (avail.size() < r.needed)
            break; // the payload is still to come
        std::string_view payload = avail.substr(h.size(), h.payload_size);
        std::string again =
            relay::encode_frame(h.flags, h.stream, std::span(h.options.data(), h.option_count), payload);
        FUZZ_CHECK(again.size() == r.needed);
        FUZZ_CHECK(std::memcmp(again.data(), avail.data(), 11) == 0); // version, size, flags, CRC, stream
        FUZZ_CHECK(again.substr(12) == avail.substr(12, r.needed - 12));
        relay::FrameHeader h2;
        auto r2 = relay::decode_header(again, h2, max_payload);
        FUZZ_CHECK(r2.status == relay::DecodeStatus::ok && r2.needed == r.needed);
        FUZZ_CHECK(h2.flags == h.flags && h2.stream == h.stream && h2.options == h.options);
        frames.advance(r.needed);
    }
    return 0;
}
