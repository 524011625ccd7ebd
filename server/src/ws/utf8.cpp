#include "ws/utf8.hpp"

#include <array>
#include <cstring>

namespace ferry::server::detail::ws {

namespace {

// A DFA in the manner of Björn Höhrmann's "Flexible and Economical UTF-8 Decoder"
// (http://bjoern.hoehrmann.de/utf-8/decoder/dfa/): bytes map to 12 classes, and (state, class) to the next
// state. Our own states, unscaled: the automaton is exact, so the only dead state is reached at the first
// byte no well-formed sequence can have there (C0/C1/F5..FF at once; E0 80, ED A0, F0 80, F4 90 at the
// second byte).
enum Class : std::uint8_t {
    ascii,   // 00..7F
    cont_8x, // 80..8F
    cont_9x, // 90..9F
    cont_ab, // A0..BF
    lead2,   // C2..DF
    lead_e0, // E0: the next byte A0..BF (80..9F would be overlong)
    lead3,   // E1..EC, EE, EF
    lead_ed, // ED: the next byte 80..9F (A0..BF would be a surrogate D800..DFFF)
    lead_f0, // F0: the next byte 90..BF (80..8F would be overlong)
    lead4,   // F1..F3
    lead_f4, // F4: the next byte 80..8F (90..BF would be above U+10FFFF)
    invalid, // C0, C1 (always overlong), F5..FF
    class_count
};

enum State : std::uint8_t {
    accept,   // between code points
    rejected, // dead: Utf8Validator::reject
    need1,    // one continuation byte (80..BF) to go
    need2,
    need3,
    after_e0, // A0..BF, then need1
    after_ed, // 80..9F, then need1
    after_f0, // 90..BF, then need2
    after_f4, // 80..8F, then need2
    state_count
};
static_assert(rejected == Utf8Validator::reject);

constexpr std::array<std::uint8_t, 256> make_classes()
{
    struct Range {
        unsigned first, last;
        Class k;
    };
    constexpr Range ranges[] = {{0x00, 0x7F, ascii},   {0x80, 0x8F, cont_8x}, {0x90, 0x9F, cont_9x},
                                {0xA0, 0xBF, cont_ab}, {0xC0, 0xC1, invalid}, {0xC2, 0xDF, lead2},
                                {0xE0, 0xE0, lead_e0}, {0xE1, 0xEC, lead3},   {0xED, 0xED, lead_ed},
                                {0xEE, 0xEF, lead3},   {0xF0, 0xF0, lead_f0}, {0xF1, 0xF3, lead4},
                                {0xF4, 0xF4, lead_f4}, {0xF5, 0xFF, invalid}};
    std::array<std::uint8_t, 256> c{};
    for (const auto &r : ranges)
        for (unsigned b = r.first; b <= r.last; ++b)
            c[b] = r.k;
    return c;
}

using Row = std::array<std::uint8_t, class_count>;

constexpr std::array<Row, state_count> make_transitions()
{
    std::array<Row, state_count> t{};
    for (auto &row : t)
        row.fill(rejected);
    t[accept][ascii] = accept;
    t[accept][lead2] = need1;
    t[accept][lead3] = need2;
    t[accept][lead4] = need3;
    t[accept][lead_e0] = after_e0;
    t[accept][lead_ed] = after_ed;
    t[accept][lead_f0] = after_f0;
    t[accept][lead_f4] = after_f4;
    const std::uint8_t next[][2] = {{need1, accept}, {need2, need1}, {need3, need2}};
    for (const auto &[from, to] : next)
        t[from][cont_8x] = t[from][cont_9x] = t[from][cont_ab] = to;
    t[after_e0][cont_ab] = need1;
    t[after_ed][cont_8x] = t[after_ed][cont_9x] = need1;
    t[after_f0][cont_9x] = t[after_f0][cont_ab] = need2;
    t[after_f4][cont_8x] = need2;
    return t;
}

constexpr auto classes = make_classes();
constexpr auto transitions = make_transitions();

} // namespace

bool Utf8Validator::feed(std::string_view bytes)
{
    std::uint8_t s = state_;
    const char *p = bytes.data();
    const char *const end = p + bytes.size();
    while (p != end) {
        // Text is mostly ASCII: between code points, skip 8 bytes at a time while none has the high bit.
        if (s == accept) {
            while (end - p >= 8) {
                std::uint64_t w;
                std::memcpy(&w, p, sizeof w);
                if (w & 0x8080808080808080ull)
                    break;
                p += 8;
            }
            if (p == end)
                break;
        }
        s = transitions[s][classes[static_cast<unsigned char>(*p++)]];
        if (s == rejected)
            break;
    }
    state_ = s;
    return s != rejected;
}

} // namespace ferry::server::detail::ws
