// Incremental, strict UTF-8 validation (RFC 3629) for WebSocket text messages and close reasons: bytes are
// fed in any pieces (a code point may straddle fragments and reads), and the first byte that cannot
// continue a well-formed sequence fails, so an invalid message is refused before more of it is buffered.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry::server::detail::ws {

class Utf8Validator {
public:
    // Checks the next bytes; false from the first invalid byte on (and for every later call until reset()).
    bool feed(std::string_view bytes);
    // No sequence is open: the text may end here.
    bool complete() const { return state_ == 0; }
    bool failed() const { return state_ == reject; }
    void reset() { state_ = 0; }

    static constexpr std::uint8_t reject = 1;

private:
    std::uint8_t state_ = 0; // a DFA state, see utf8.cpp
};

// The whole of `s` is well-formed UTF-8.
inline bool valid_utf8(std::string_view s)
{
    Utf8Validator v;
    return v.feed(s) && v.complete();
}

} // namespace ferry::server::detail::ws
