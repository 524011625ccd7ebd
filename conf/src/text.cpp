#include "ferry/conf/text.hpp"

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

} // namespace ferry
