// JSON strings written by hand, shared by the JSON context codec (context_json.cpp: every request's strings)
// and the JSON log encoding (log.cpp: worker stderr lines, request targets): inline, since both are hot.
#pragma once

#include "ferry/base/text.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry {

// Length of the valid UTF-8 sequence at p (Go's utf8 rules: no overlongs, no surrogates, <= U+10FFFF),
// or 0 if the bytes at p do not start one.
inline std::size_t utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    const unsigned char c = p[0];
    const auto left = static_cast<std::size_t>(end - p);
    auto cont = [&](std::size_t i) { return (p[i] & 0xC0u) == 0x80u; };
    if (c >= 0xC2 && c <= 0xDF)
        return left >= 2 && cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || !cont(1) || !cont(2))
            return 0;
        if (c == 0xE0 && p[1] < 0xA0)
            return 0; // overlong
        if (c == 0xED && p[1] > 0x9F)
            return 0; // surrogate
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || !cont(1) || !cont(2) || !cont(3))
            return 0;
        if (c == 0xF0 && p[1] < 0x90)
            return 0; // overlong
        if (c == 0xF4 && p[1] > 0x8F)
            return 0; // > U+10FFFF
        return 4;
    }
    return 0;
}

// Appends s as a JSON string. Control characters, quotes and backslashes are escaped; each byte that is
// not part of valid UTF-8 becomes \ufffd (as Go's encoding/json does), so PHP's json_decode accepts it.
inline void append_json_string(std::string &out, std::string_view s)
{
    static constexpr char hex[] = "0123456789abcdef";
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const auto *end = p + s.size();
    const auto *run = p;
    out += '"';
    while (p < end) {
        const unsigned char c = *p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            ++p;
            continue;
        }
        if (c >= 0x80) {
            if (std::size_t n = utf8_sequence(p, end)) {
                p += n;
                continue;
            }
        }
        out.append(reinterpret_cast<const char *>(run), static_cast<std::size_t>(p - run));
        if (const char *esc = short_escape(c)) {
            out += esc;
        } else if (c == '\b') {
            out += "\\b";
        } else if (c == '\f') {
            out += "\\f";
        } else if (c < 0x20) {
            const char esc6[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0x0F]};
            out.append(esc6, 6);
        } else {
            out += "\\ufffd";
        }
        ++p;
        run = p;
    }
    out.append(reinterpret_cast<const char *>(run), static_cast<std::size_t>(end - run));
    out += '"';
}

} // namespace ferry
