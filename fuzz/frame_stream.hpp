// A fuzz input read as a stream of Goridge frames (the worker pipes' and the RPC listener's framing): its
// first byte holds the options, the rest the frames. Shared by the goridge_frame and rpc_frame targets.
#pragma once

#include "fuzz_util.hpp"

#include "ferry/relay/frame.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace fuzz {

class FrameStream {
public:
    explicit FrameStream(Input &in)
    {
        const std::uint8_t opts = in.byte();
        fix_crc_ = opts & 1; // each header's CRC made right, to reach what follows the check
        max_payload = opts & 2 ? 64 : 1u << 20; // a small limit, to reach the over-limit paths
        bytes_ = std::string(in.rest());
    }
    bool done() const { return pos_ >= bytes_.size(); }
    // The bytes from the current frame on (its header's CRC fixed up if asked).
    std::string_view next()
    {
        if (fix_crc_ && bytes_.size() - pos_ >= 10) {
            std::uint32_t crc = ferry::relay::crc32(bytes_.data() + pos_, 6);
            for (int i = 0; i < 4; ++i)
                bytes_[pos_ + 6 + i] = static_cast<char>(crc >> (8 * i));
        }
        return std::string_view(bytes_).substr(pos_);
    }
    void advance(std::size_t n) { pos_ += n; }

    std::size_t max_payload;

private:
    bool fix_crc_;
    std::string bytes_;
    std::size_t pos_ = 0;
};

} // namespace fuzz
