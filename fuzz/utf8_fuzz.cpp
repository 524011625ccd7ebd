// ws::Utf8Validator against a plain reference decoder (RFC 3629: no overlongs, no surrogates, nothing above
// U+10FFFF), the input fed whole and in pieces; and conf's one-pass check (ferry::invalid_utf8_at, which the
// config loader uses) against the same reference, down to the offset it names.
#include "fuzz_util.hpp"

#include "ferry/base/text.hpp"
#include "ws/utf8.hpp"

namespace {

// The length of the well-formed sequence at s[i], 0 if none starts there (or it is cut short).
std::size_t sequence(std::string_view s, std::size_t i)
{
    auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned c = b(i);
    if (c < 0x80)
        return 1;
    std::size_t len = c >= 0xC2 && c <= 0xDF   ? 2
                      : c >= 0xE0 && c <= 0xEF ? 3
                      : c >= 0xF0 && c <= 0xF4 ? 4
                                               : 0;
    if (len == 0 || i + len > s.size())
        return 0;
    std::uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (std::size_t k = 1; k < len; ++k) {
        if ((b(i + k) & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

// The offset of the first byte no well-formed sequence covers, or npos.
std::size_t first_invalid(std::string_view s)
{
    for (std::size_t i = 0; i < s.size();) {
        std::size_t n = sequence(s, i);
        if (n == 0)
            return i;
        i += n;
    }
    return std::string_view::npos;
}

bool reference(std::string_view s)
{
    return first_invalid(s) == std::string_view::npos;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    namespace ws = ferry::server::detail::ws;
    fuzz::Input in(data, size);
    std::size_t step = fuzz::piece(in.byte()) + 1;
    std::string_view s = in.rest();
    bool expected = reference(s);
    FUZZ_CHECK(ws::valid_utf8(s) == expected);
    ws::Utf8Validator v;
    bool ok = true;
    for (std::size_t pos = 0; pos < s.size(); pos += step)
        ok = v.feed(s.substr(pos, step)) && ok;
    FUZZ_CHECK((ok && v.complete()) == expected);
    FUZZ_CHECK(v.failed() == !ok);
    FUZZ_CHECK(ferry::invalid_utf8_at(s) == first_invalid(s));
    return 0;
}
