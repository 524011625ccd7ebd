// RPC frames (docs/protocol.md §6), shared by the RPC listener and the CLI: a Goridge frame with two options,
// [sequence, length of the method name], and the payload method name ‖ encoded argument (or result). An
// error reply has the ERROR flag and the message after the method name.
#pragma once

#include "ferry/relay/frame.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::server::detail {

struct RpcMessage {
    std::uint8_t flags = relay::flag::codec_json;
    std::uint32_t seq = 0;
    std::string method;
    std::string body; // the argument (request) or result / error message (reply)
};

std::string encode_rpc(std::uint8_t flags, std::uint32_t seq, std::string_view method, std::string_view body);

struct RpcParse {
    relay::DecodeStatus status = relay::DecodeStatus::need_more;
    std::size_t needed = relay::header_size; // need_more: bytes wanted in all; ok: the frame's size
    RpcMessage message;                      // ok
    std::string error;                       // error: why the bytes are not an RPC frame
    // error: the frame is well formed but its payload is over `max_payload` ("RPC frame of N bytes is over
    // the M-byte limit"); `needed` is its whole size, `message` has its sequence and, when it was there, its
    // method name, so that the caller can be answered and the frame skipped.
    bool too_large = false;
};

// One frame from the front of `in`, payload at most `max_payload` bytes.
RpcParse parse_rpc(std::string_view in, std::size_t max_payload);

} // namespace ferry::server::detail
