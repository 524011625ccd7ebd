#include "rpc_frame.hpp"

#include <array>
#include <limits>

namespace ferry::server::detail {

std::string encode_rpc(std::uint8_t flags, std::uint32_t seq, std::string_view method, std::string_view body)
{
    std::string payload;
    payload.reserve(method.size() + body.size());
    payload.append(method).append(body);
    const std::array<std::uint32_t, 2> options{seq, static_cast<std::uint32_t>(method.size())};
    return relay::encode_frame(flags, 0, options, payload);
}

RpcParse parse_rpc(std::string_view in, std::size_t max_payload)
{
    RpcParse out;
    relay::FrameHeader h;
    // The length is judged here, not by decode_header: an over-size frame is still an RPC frame, whose
    // caller gets an error that says so.
    auto r = relay::decode_header(in, h, std::numeric_limits<std::uint32_t>::max());
    out.needed = r.needed;
    if (r.status == relay::DecodeStatus::error) {
        out.status = relay::DecodeStatus::error;
        out.error = r.error;
        return out;
    }
    if (r.status == relay::DecodeStatus::ok && h.payload_size > max_payload) {
        constexpr std::uint32_t longest_name = 256;
        const bool named = h.option_count == 2 && h.options[1] > 0 && h.options[1] <= longest_name;
        if (named && in.size() < h.size() + h.options[1]) {
            out.needed = h.size() + h.options[1]; // the method name first, to name the call in the answer
            return out;
        }
        out.status = relay::DecodeStatus::error;
        out.too_large = true;
        out.error = "RPC frame of " + std::to_string(h.payload_size) + " bytes is over the " +
                    std::to_string(max_payload) + "-byte limit";
        if (h.option_count >= 1)
            out.message.seq = h.options[0];
        if (named)
            out.message.method = std::string(in.substr(h.size(), h.options[1]));
        return out;
    }
    if (r.status == relay::DecodeStatus::need_more || in.size() < r.needed)
        return out;
    if (h.option_count != 2) {
        out.status = relay::DecodeStatus::error;
        out.error = "an RPC frame needs 2 options (sequence, method name length), this one has " +
                    std::to_string(h.option_count);
        return out;
    }
    std::string_view payload = in.substr(h.size(), h.payload_size);
    if (h.options[1] > payload.size() || h.options[1] == 0) {
        out.status = relay::DecodeStatus::error;
        out.error = "the method name length (" + std::to_string(h.options[1]) + ") does not fit the " +
                    std::to_string(payload.size()) + "-byte payload";
        return out;
    }
    out.status = relay::DecodeStatus::ok;
    out.message.flags = h.flags;
    out.message.seq = h.options[0];
    out.message.method = std::string(payload.substr(0, h.options[1]));
    out.message.body = std::string(payload.substr(h.options[1]));
    return out;
}

} // namespace ferry::server::detail
