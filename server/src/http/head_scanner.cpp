#include "head_scanner.hpp"

#include "ferry/base/text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ferry::server::detail {
namespace {

constexpr bool is_control(unsigned char c)
{
    return (c < 0x20 && c != '\t') || c == 0x7f;
}

// Bytes scan() must look at: CR, LF and the control bytes it rejects; everything else is skipped fast.
struct SpecialBytes {
    bool table[256] = {};
    constexpr SpecialBytes()
    {
        for (int c = 0; c < 256; ++c)
            table[c] = is_control(static_cast<unsigned char>(c)) || c == '\r' || c == '\n';
    }
};
constexpr SpecialBytes special_bytes;

std::string byte_name(unsigned char c)
{
    static constexpr char hex[] = "0123456789abcdef";
    return std::string("0x") + hex[c >> 4] + hex[c & 15];
}

HttpError error(int status, std::string message)
{
    return HttpError{status, std::move(message)};
}

HttpResult<void> check_request_line(std::string_view line)
{
    auto sp1 = line.find(' ');
    auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos || sp1 == 0 ||
        sp2 == sp1 + 1 || line.find('\t') != std::string_view::npos)
        return error(400, "malformed request line \"" + printable(line) +
                              "\" (expected METHOD SP target SP HTTP/1.x)");
    std::string_view method = line.substr(0, sp1);
    if (!is_token(method))
        return error(400, "invalid method \"" + printable(method) + "\"");
    std::string_view version = line.substr(sp2 + 1);
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !digit(version[5]) || version[6] != '.' ||
        !digit(version[7]))
        return error(400, "malformed HTTP version \"" + printable(version) + "\"");
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return error(505, "HTTP version " + std::string(version.substr(5)) +
                              " is not supported (only 1.0 and 1.1)");
    return {};
}

HttpError request_line_too_long(const Limits &limits)
{
    return error(414, "request line longer than " + std::to_string(limits.max_request_line) + " bytes");
}

HttpError head_too_large(const Limits &limits)
{
    return error(431, "request header larger than " + std::to_string(limits.max_header_size) + " bytes");
}

} // namespace

void HeadScanner::start(std::size_t at)
{
    pos_ = line_start_ = head_start_ = head_end_ = at;
    cr_ = done_ = request_line_seen_ = false;
}

void HeadScanner::shift(std::size_t by)
{
    for (std::size_t *off : {&pos_, &line_start_, &head_start_, &head_end_})
        *off = *off >= by ? *off - by : 0;
}

HttpResult<void> HeadScanner::scan(const char *buf, std::size_t end, const Limits &limits)
{
    const auto *b = reinterpret_cast<const unsigned char *>(buf);
    std::size_t i = pos_;
    for (; i < end && !done_; ++i) {
        // The head, from its request line to its empty line, has max_header_size bytes of room: the byte
        // after them is a 431 whatever it is, wherever the reads split (so the scan stops there).
        const std::size_t room_end = head_start_ + limits.max_header_size;
        const std::size_t stop = request_line_seen_ ? std::min(end, room_end) : end;
        if (!cr_) {
            // Eight bytes at a time while none is a control byte (< 0x20 or 0x7f; obs-text >= 0x80 passes):
            // the usual head has one per line, its CR.
            while (i + 8 <= stop) {
                std::uint64_t x;
                std::memcpy(&x, b + i, 8);
                constexpr std::uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
                std::uint64_t del = x ^ (0x7f * ones);
                if (((x - 0x20 * ones) & ~x & high) | ((del - ones) & ~del & high))
                    break;
                i += 8;
            }
            while (i < stop && !special_bytes.table[b[i]])
                ++i;
            if (i == end)
                break;
        }
        if (request_line_seen_ && i >= room_end)
            return head_too_large(limits);
        unsigned char c = b[i];
        // A request line over the limit is a 414 whatever byte comes next, as it is when the bytes arrive
        // one read at a time (the check after the loop): the status must not depend on how reads split.
        const std::size_t line_end = cr_ ? i - 1 : i; // the CR, or this byte
        if (!request_line_seen_ && line_end - line_start_ > limits.max_request_line)
            return request_line_too_long(limits);
        if (cr_) {
            cr_ = false;
            if (c != '\n')
                return error(400, "bare CR in the request head (lines must end with CRLF)");
            if (!request_line_seen_) {
                if (line_end == line_start_) {
                    line_start_ = i + 1; // empty lines before the request line are ignored (RFC 9112 §2.2)
                    continue;
                }
                if (auto r = check_request_line(std::string_view(buf + line_start_, line_end - line_start_));
                    !r)
                    return r;
                request_line_seen_ = true;
                head_start_ = line_start_;
            } else if (line_end == line_start_) {
                done_ = true;
                head_end_ = i + 1;
            } else if (b[line_start_] == ' ' || b[line_start_] == '\t') {
                return error(400, "obsolete line folding in a header value");
            }
            line_start_ = i + 1;
            continue;
        }
        if (c == '\r') {
            cr_ = true;
            continue;
        }
        if (c == '\n')
            return error(400, "bare LF in the request head (lines must end with CRLF)");
        if (is_control(c))
            return error(400, "control byte " + byte_name(c) + " in the request head");
    }
    pos_ = i;
    // A CR read last is not part of the line (its LF may be in the next read).
    if (!request_line_seen_ && pos_ - line_start_ - (cr_ ? 1 : 0) > limits.max_request_line)
        return request_line_too_long(limits);
    return {};
}

} // namespace ferry::server::detail
