// Showing untrusted bytes in a log line or a message: the one escaper every library uses.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry {

inline bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

// Printable ASCII as is; backslash, double quote, \n, \r, \t escaped; every other byte as \xNN, or kept as is
// when `keep_utf8` (bytes >= 0x80: a UTF-8 config value stays readable). At most `limit` input bytes, then
// "...".
std::string printable(std::string_view bytes, std::size_t limit = 64, bool keep_utf8 = false);

// The escape C, JSON and printable() all write for a quote, a backslash, \n, \r or \t; nullptr for
// any other byte.
constexpr const char *short_escape(unsigned char c)
{
    switch (c) {
    case '"':
        return "\\\"";
    case '\\':
        return "\\\\";
    case '\n':
        return "\\n";
    case '\r':
        return "\\r";
    case '\t':
        return "\\t";
    default:
        return nullptr;
    }
}

// The text in double quotes, escaped as printable() does, UTF-8 kept, never cut.
std::string quote(std::string_view text);

// The offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong form, no
// surrogate, nothing above U+10FFFF; a sequence cut short at the end counts at its lead byte), or npos.
// One pass over a whole string; the WebSocket one (server's ws/utf8.hpp) is a streaming DFA.
std::size_t invalid_utf8_at(std::string_view text);

} // namespace ferry
