// RFC 6455 framing, server side: an incremental parser of client frames and encoders of server frames.
// The parser holds a few dozen bytes of state plus, only while a message is split across frames or reads,
// the reassembly buffer; a frame that arrives whole in one read is delivered as a view into the caller's
// buffer, unmasked in place, with no copy.
#pragma once

#include "ws/budget.hpp"
#include "ws/utf8.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail::ws {

enum class Opcode : std::uint8_t { continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10 };

// Close status codes (RFC 6455 §7.4.1, IANA registry).
namespace close_status {
inline constexpr std::uint16_t normal = 1000;
inline constexpr std::uint16_t going_away = 1001;
inline constexpr std::uint16_t protocol_error = 1002;
inline constexpr std::uint16_t unsupported = 1003;
inline constexpr std::uint16_t no_status = 1005; // reported for an empty close frame, never sent
inline constexpr std::uint16_t abnormal = 1006;  // the connection dropped without a close frame, never sent
inline constexpr std::uint16_t invalid_payload = 1007;
inline constexpr std::uint16_t policy = 1008;
inline constexpr std::uint16_t too_big = 1009;
inline constexpr std::uint16_t internal = 1011;
inline constexpr std::uint16_t try_again_later = 1013;
} // namespace close_status

// A code a peer may put on the wire: 1000-1003, 1007-1014, 3000-4999 (1004-1006 and 1015 are reserved
// or local-only, 1016-2999 unassigned; 1012-1014 are registered and accepted, as Autobahn does).
bool valid_close_code(std::uint16_t code);

struct Limits {
    std::uint64_t max_message = 16u << 20; // a whole message, the sum of its fragments
    bool allow_rsv1 = false;               // permessage-deflate negotiated: RSV1 may mark a message
    // The server-wide budget the reassembly buffer's capacity is taken from (null: none). A message that
    // cannot grow its buffer fails with 1009 and refused_by_budget().
    ByteBudget *budget = nullptr;
};

enum class FrameEvent : std::uint8_t { need_more, message, ping, pong, close, error };

struct Parsed {
    FrameEvent event = FrameEvent::need_more;
    Opcode type = Opcode::continuation; // message: text or binary; ping/pong/close: that opcode
    bool compressed = false;            // message: RSV1 was set on its first frame (not UTF-8 checked then)
    // message/ping/pong/close: the (unmasked) payload, valid until the next parse() or release_memory().
    std::string_view payload;
    std::uint16_t close_code = 0;  // close: the peer's code, 1005 if its close frame was empty
    std::string_view close_reason; // close: UTF-8 checked, a view into payload
    std::uint16_t error_code = 0;  // error: the close code to answer with, 1002, 1007 or 1009
    std::string_view error;        // error: what was wrong, a static string
    // Bytes of the input used. need_more always uses all of it (partial headers and payloads are kept),
    // so the caller may reuse its buffer; after an event, the rest of the input is for the next call.
    std::size_t consumed = 0;
};

class FrameParser {
public:
    FrameParser() = default;
    explicit FrameParser(Limits limits) : limits_(limits) {}
    ~FrameParser();
    FrameParser(const FrameParser &) = delete;
    FrameParser &operator=(const FrameParser &) = delete;

    // Parses client frames from the front of `input` until one event: a complete message, a control frame,
    // an error, or the input's end (need_more). The payload bytes of `input` are unmasked in place.
    // Control frames between the fragments of a message are reported as they come. After an error every
    // call returns that error again, consuming nothing.
    Parsed parse(std::span<char> input);

    bool failed() const { return error_code_ != 0; }
    // A message has begun and not ended (the next frames continue it).
    bool in_message() const { return msg_type_ != Opcode::continuation; }
    // Nothing begun: no message open, no frame in part.
    bool idle() const { return !in_message() && hdr_len_ == 0 && !in_payload_; }
    // The last error was the budget's refusal to hold more of a message.
    bool refused_by_budget() const { return budget_refused_; }
    // Heap bytes held (the reassembly buffers).
    std::size_t memory() const;
    // Gives the buffers' spare capacity back (an idle connection should hold nothing); the bytes of a
    // message still being received are kept. Invalidates the last result's payload.
    void release_memory();
    // Frees everything, a message in part too (the connection ends: nothing more is parsed).
    void discard();

private:
    bool header_byte(std::uint8_t b);
    bool set_length(std::uint64_t len);
    bool fail(std::uint16_t code, std::string_view why);
    Parsed failure(std::size_t consumed) const;
    Parsed control_frame(std::string_view payload, std::size_t consumed);
    Parsed message(std::string_view payload, std::size_t consumed);
    void unmask(char *p, std::size_t n);
    void drop_delivered();
    bool grow(std::size_t n); // room for n more message bytes, from the budget
    void settle();            // the budget holds the buffer's capacity, no more, no less

    // Only while a message or a control frame spans frames or reads (made then, freed by release_memory()).
    struct Partial {
        std::vector<char> msg; // the message so far (a vector: reserve() gives the exact capacity)
        std::string ctl;       // a control frame's payload (<= 125 bytes)
    };
    Partial &part();

    Limits limits_;
    std::unique_ptr<Partial> part_;
    std::size_t charged_ = 0; // taken from limits_.budget for part_->msg's capacity
    std::string_view error_;
    std::uint64_t remaining_ = 0; // header: the length as decoded so far; payload: bytes still to come
    std::uint8_t mask_[4]{};
    std::uint8_t mask_pos_ = 0; // payload bytes unmasked so far, mod 4
    std::uint8_t hdr_len_ = 0;  // header bytes read (2 to 14 in all)
    std::uint8_t hdr_need_ = 2; // header size, known after its second byte
    Opcode op_ = Opcode::continuation;
    Opcode msg_type_ = Opcode::continuation; // the open message's type; continuation = none
    bool fin_ = false;
    bool msg_rsv1_ = false;
    bool in_payload_ = false; // the header is complete
    bool started_ = false;    // some of this frame's payload arrived in an earlier chunk
    bool drop_msg_ = false;   // the last result's payload is in msg_ / ctl_: drop it on the next call
    bool drop_ctl_ = false;
    bool budget_refused_ = false;
    std::uint16_t error_code_ = 0;
    Utf8Validator utf8_; // the open text message, across fragments
};

// Server frames are never masked. Writes the header of a frame carrying `payload_len` bytes into `out`
// (room for 10 bytes) and returns its size: 2, 4 or 10.
std::size_t encode_header(std::uint8_t *out, Opcode op, std::uint64_t payload_len, bool fin = true);
std::string encode_frame(Opcode op, std::string_view payload);
// A close frame; the reason is cut to fit the 125-byte control payload, at a UTF-8 sequence boundary.
// no_status (1005) gives an empty close frame (1005 itself is never sent).
std::string encode_close(std::uint16_t code, std::string_view reason = {});

} // namespace ferry::server::detail::ws
