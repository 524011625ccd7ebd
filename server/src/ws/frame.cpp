#include "ws/frame.hpp"

#include <algorithm>
#include <cstring>

namespace ferry::server::detail::ws {

namespace {

// A reassembly buffer that grew above this is freed after its message, not kept for the next one.
constexpr std::size_t keep_capacity = 64u << 10;

constexpr bool is_control(Opcode op)
{
    return (static_cast<std::uint8_t>(op) & 0x08) != 0;
}

// Heap bytes behind a string (none while its characters fit in the string itself).
std::size_t heap_bytes(const std::string &s)
{
    static const std::size_t inline_capacity = std::string().capacity();
    return s.capacity() > inline_capacity ? s.capacity() + 1 : 0;
}

void free_string(std::string &s)
{
    std::string().swap(s); // clear() keeps the capacity, and shrink_to_fit() is only a request
}

void free_vector(std::vector<char> &v)
{
    std::vector<char>().swap(v);
}

Parsed need_more(std::size_t consumed)
{
    Parsed r;
    r.consumed = consumed;
    return r;
}

} // namespace

bool valid_close_code(std::uint16_t code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

bool FrameParser::fail(std::uint16_t code, std::string_view why)
{
    error_code_ = code;
    error_ = why;
    return false;
}

Parsed FrameParser::failure(std::size_t consumed) const
{
    Parsed r;
    r.event = FrameEvent::error;
    r.error_code = error_code_;
    r.error = error_;
    r.consumed = consumed;
    return r;
}

// Checks each header byte as it arrives, so a bad frame fails before the rest of it is awaited.
bool FrameParser::header_byte(std::uint8_t b)
{
    const std::uint8_t at = hdr_len_++;
    if (at == 0) {
        fin_ = (b & 0x80) != 0;
        const bool rsv1 = (b & 0x40) != 0;
        if ((b & 0x30) != 0 || (rsv1 && !limits_.allow_rsv1))
            return fail(close_status::protocol_error, "reserved bits set");
        const std::uint8_t op = b & 0x0F;
        switch (op) {
        case 0:
            if (!in_message())
                return fail(close_status::protocol_error, "continuation frame without a message");
            if (rsv1)
                return fail(close_status::protocol_error, "RSV1 on a continuation frame");
            break;
        case 1:
        case 2:
            if (in_message())
                return fail(close_status::protocol_error, "new message while a fragmented one is open");
            msg_type_ = static_cast<Opcode>(op);
            msg_rsv1_ = rsv1;
            utf8_.reset();
            break;
        case 8:
        case 9:
        case 10:
            if (!fin_)
                return fail(close_status::protocol_error, "fragmented control frame");
            if (rsv1)
                return fail(close_status::protocol_error, "RSV1 on a control frame");
            break;
        default:
            return fail(close_status::protocol_error, "unknown opcode");
        }
        op_ = static_cast<Opcode>(op);
        return true;
    }
    if (at == 1) {
        if ((b & 0x80) == 0)
            return fail(close_status::protocol_error, "unmasked client frame");
        const std::uint8_t len7 = b & 0x7F;
        if (is_control(op_) && len7 > 125)
            return fail(close_status::protocol_error, "control frame payload over 125 bytes");
        hdr_need_ = static_cast<std::uint8_t>(2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4);
        remaining_ = 0;
        return len7 < 126 ? set_length(len7) : true;
    }
    const std::uint8_t length_end = static_cast<std::uint8_t>(hdr_need_ - 4);
    if (at < length_end) {
        if (at == 2 && hdr_need_ == 14 && (b & 0x80) != 0)
            return fail(close_status::protocol_error, "64-bit length with the most significant bit set");
        remaining_ = remaining_ << 8 | b;
        // Non-minimal encodings (a 16- or 64-bit field for a short length) are legal and accepted.
        return at + 1 == length_end ? set_length(remaining_) : true;
    }
    mask_[at - length_end] = b;
    if (hdr_len_ == hdr_need_) {
        in_payload_ = true;
        started_ = false;
        mask_pos_ = 0;
    }
    return true;
}

// The frame's length is known: refuse an oversized message before any of its payload is read.
bool FrameParser::set_length(std::uint64_t len)
{
    remaining_ = len;
    if (!is_control(op_)) {
        const std::uint64_t so_far = part_ ? part_->msg.size() : 0;
        if (len > limits_.max_message || so_far > limits_.max_message - len)
            return fail(close_status::too_big, "message too big");
    }
    return true;
}

void FrameParser::unmask(char *p, std::size_t n)
{
    // The key, rotated to where this chunk starts, twice over: 8 bytes at a time, through memcpy (the
    // payload has no alignment).
    std::uint8_t key[8];
    for (std::size_t j = 0; j < 8; ++j)
        key[j] = mask_[(mask_pos_ + j) & 3];
    std::uint64_t k;
    std::memcpy(&k, key, sizeof k);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, sizeof w);
        w ^= k;
        std::memcpy(p + i, &w, sizeof w);
    }
    for (; i < n; ++i)
        p[i] = static_cast<char>(static_cast<std::uint8_t>(p[i]) ^ key[i & 7]);
    mask_pos_ = static_cast<std::uint8_t>((mask_pos_ + n) & 3);
}

void FrameParser::drop_delivered()
{
    if (drop_msg_) {
        if (part_->msg.capacity() > keep_capacity)
            free_vector(part_->msg);
        else
            part_->msg.clear();
        drop_msg_ = false;
    }
    if (drop_ctl_) {
        free_string(part_->ctl); // at most 125 bytes, and rare (a control frame split across reads)
        drop_ctl_ = false;
    }
    if (part_ && part_->msg.empty() && part_->ctl.empty() && part_->msg.capacity() == 0 &&
        heap_bytes(part_->ctl) == 0)
        part_.reset();
    settle();
}

void FrameParser::settle()
{
    if (!limits_.budget)
        return;
    const std::size_t held = part_ ? part_->msg.capacity() : 0;
    if (held > charged_)
        limits_.budget->take(held - charged_);
    else
        limits_.budget->give(charged_ - held);
    charged_ = held;
}

bool FrameParser::grow(std::size_t n)
{
    auto &m = part().msg;
    const std::size_t need = m.size() + n;
    if (need <= m.capacity())
        return true;
    // Doubling (up to the largest message); when the budget cannot give that, a quarter more; when it
    // cannot give that either, the message is refused. What the buffer holds is taken before it grows.
    const std::size_t most = static_cast<std::size_t>(limits_.max_message);
    const std::size_t cap = m.capacity();
    const std::size_t tries[2] = {std::max(need, std::min(std::max<std::size_t>(2 * cap, 4096), most)),
                                  std::max(need, std::min(cap + cap / 4, most))};
    for (const std::size_t to : tries) {
        if (limits_.budget && !limits_.budget->try_take(to - charged_))
            continue;
        if (limits_.budget)
            charged_ = to;
        m.reserve(to);
        settle(); // reserve() gives exactly `to`; should it give more, that is taken too
        return true;
    }
    budget_refused_ = true;
    return fail(close_status::too_big, "server message memory full");
}

FrameParser::Partial &FrameParser::part()
{
    if (!part_)
        part_ = std::make_unique<Partial>();
    return *part_;
}

Parsed FrameParser::control_frame(std::string_view payload, std::size_t consumed)
{
    Parsed r;
    r.type = op_;
    r.payload = payload;
    r.consumed = consumed;
    if (op_ == Opcode::ping) {
        r.event = FrameEvent::ping;
        return r;
    }
    if (op_ == Opcode::pong) {
        r.event = FrameEvent::pong;
        return r;
    }
    r.event = FrameEvent::close;
    if (payload.empty()) {
        r.close_code = close_status::no_status;
        return r;
    }
    if (payload.size() == 1) {
        fail(close_status::protocol_error, "close frame with a 1-byte payload");
        return failure(consumed);
    }
    r.close_code = static_cast<std::uint16_t>(static_cast<std::uint8_t>(payload[0]) << 8 |
                                              static_cast<std::uint8_t>(payload[1]));
    if (!valid_close_code(r.close_code)) {
        fail(close_status::protocol_error, "invalid close code");
        return failure(consumed);
    }
    r.close_reason = payload.substr(2);
    if (!valid_utf8(r.close_reason)) {
        fail(close_status::invalid_payload, "close reason is not UTF-8");
        return failure(consumed);
    }
    return r;
}

Parsed FrameParser::message(std::string_view payload, std::size_t consumed)
{
    Parsed r;
    if (msg_type_ == Opcode::text && !msg_rsv1_ && !utf8_.complete()) {
        fail(close_status::invalid_payload, "text message ends inside a UTF-8 sequence");
        return failure(consumed);
    }
    r.event = FrameEvent::message;
    r.type = msg_type_;
    r.compressed = msg_rsv1_;
    r.payload = payload;
    r.consumed = consumed;
    msg_type_ = Opcode::continuation;
    msg_rsv1_ = false;
    utf8_.reset();
    return r;
}

Parsed FrameParser::parse(std::span<char> input)
{
    if (failed())
        return failure(0);
    drop_delivered();
    std::size_t pos = 0;
    for (;;) {
        while (!in_payload_) {
            if (pos == input.size())
                return need_more(pos);
            if (!header_byte(static_cast<std::uint8_t>(input[pos++])))
                return failure(pos);
        }
        char *const p = input.data() + pos;
        const std::size_t avail = input.size() - pos;
        const bool text = msg_type_ == Opcode::text && !msg_rsv1_ && !is_control(op_);
        const bool whole_frame_here = !started_ && remaining_ <= avail;
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, avail));
        unmask(p, n);
        pos += n;
        remaining_ -= n;
        if (text && !utf8_.feed({p, n})) {
            fail(close_status::invalid_payload, "text message is not UTF-8");
            return failure(pos);
        }
        const bool done = remaining_ == 0;
        if (!done && n == 0)
            return need_more(pos); // the header ended with the input: the payload may still come whole
        if (done) {
            in_payload_ = false;
            hdr_len_ = 0;
        }
        // A whole unfragmented frame, or a whole control frame, in this input: deliver it where it lies.
        if (whole_frame_here && fin_ && op_ != Opcode::continuation)
            return is_control(op_) ? control_frame({p, n}, pos) : message({p, n}, pos);
        started_ = true;
        if (is_control(op_)) {
            part().ctl.append(p, n);
            if (!done)
                return need_more(pos);
            drop_ctl_ = true;
            return control_frame(part_->ctl, pos);
        }
        // Grows geometrically with what arrives; never reserved from the declared length (a peer could
        // announce 16 MiB and send nothing).
        if (!grow(n))
            return failure(pos);
        part_->msg.insert(part_->msg.end(), p, p + n);
        if (!done)
            return need_more(pos);
        if (fin_) {
            drop_msg_ = true;
            return message({part_->msg.data(), part_->msg.size()}, pos);
        }
        // A fragment ended: the message goes on in the next frame, perhaps in this same input.
    }
}

std::size_t FrameParser::memory() const
{
    return part_ ? sizeof(Partial) + part_->msg.capacity() + heap_bytes(part_->ctl) : 0;
}

FrameParser::~FrameParser()
{
    discard();
}

void FrameParser::discard()
{
    part_.reset();
    drop_msg_ = drop_ctl_ = false;
    settle();
}

void FrameParser::release_memory()
{
    if (!part_)
        return;
    drop_delivered(); // may free it already
    if (!part_)
        return;
    if (part_->msg.empty() && part_->ctl.empty()) {
        part_.reset(); // an idle connection's parser holds nothing
        settle();
        return;
    }
    part_->msg.shrink_to_fit();
    part_->ctl.shrink_to_fit();
    settle();
}

std::size_t encode_header(std::uint8_t *out, Opcode op, std::uint64_t payload_len, bool fin)
{
    out[0] = static_cast<std::uint8_t>((fin ? 0x80 : 0) | static_cast<std::uint8_t>(op));
    if (payload_len <= 125) {
        out[1] = static_cast<std::uint8_t>(payload_len);
        return 2;
    }
    const int bytes = payload_len <= 0xFFFF ? 2 : 8;
    out[1] = bytes == 2 ? 126 : 127;
    for (int i = 0; i < bytes; ++i)
        out[2 + i] = static_cast<std::uint8_t>(payload_len >> (8 * (bytes - 1 - i)));
    return static_cast<std::size_t>(2 + bytes);
}

std::string encode_frame(Opcode op, std::string_view payload)
{
    std::uint8_t header[10];
    const std::size_t h = encode_header(header, op, payload.size());
    std::string f;
    f.reserve(h + payload.size());
    f.append(reinterpret_cast<const char *>(header), h);
    f.append(payload);
    return f;
}

std::string encode_close(std::uint16_t code, std::string_view reason)
{
    if (code == close_status::no_status)
        return encode_frame(Opcode::close, {});
    std::size_t n = std::min<std::size_t>(reason.size(), 123);
    // Cut before a continuation byte's sequence, never inside it.
    if (n < reason.size())
        while (n > 0 && (static_cast<std::uint8_t>(reason[n]) & 0xC0) == 0x80)
            --n;
    std::string payload;
    payload.reserve(2 + n);
    payload.push_back(static_cast<char>(code >> 8));
    payload.push_back(static_cast<char>(code & 0xFF));
    payload.append(reason.substr(0, n));
    return encode_frame(Opcode::close, payload);
}

} // namespace ferry::server::detail::ws
