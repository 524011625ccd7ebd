#include "ferry/base/text.hpp"

namespace ferry {

std::string printable(std::string_view bytes, std::size_t limit, bool keep_utf8)
{
    static constexpr char hex[] = "0123456789abcdef";
    const bool cut = bytes.size() > limit;
    if (cut)
        bytes = bytes.substr(0, limit);
    std::string out;
    out.reserve(bytes.size() + 8);
    for (char ch : bytes) {
        const auto c = static_cast<unsigned char>(ch);
        if (const char *esc = short_escape(c)) {
            out += esc;
        } else if ((c >= 0x20 && c < 0x7F) || (keep_utf8 && c >= 0x80)) {
            out += ch;
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0x0F];
        }
    }
    if (cut)
        out += "...";
    return out;
}

std::string quote(std::string_view text)
{
    return '"' + printable(text, std::string_view::npos, true) + '"';
}

std::size_t invalid_utf8_at(std::string_view text)
{
    const auto *b = reinterpret_cast<const unsigned char *>(text.data());
    const std::size_t n = text.size();
    for (std::size_t i = 0; i < n;) {
        const unsigned c = b[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        // The length of the sequence, and the range of its second byte (the others are 80..BF): the
        // narrow ranges rule out overlong forms (E0, F0), surrogates (ED) and code points above U+10FFFF
        // (F4).
        std::size_t len = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return i; // 80..C1 (a continuation byte or an overlong lead), F5..FF
        }
        if (n - i < len || b[i + 1] < lo || b[i + 1] > hi)
            return i;
        for (std::size_t k = 2; k < len; ++k)
            if (b[i + k] < 0x80 || b[i + k] > 0xBF)
                return i;
        i += len;
    }
    return std::string_view::npos;
}

} // namespace ferry
