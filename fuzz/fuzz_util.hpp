// Helpers shared by the fuzz targets: checks that abort (so libFuzzer and the replay tests both see a
// failure), and a reader that splits one input into parameters and a payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                    \
            std::abort();                                                                                    \
        }                                                                                                    \
    } while (0)

namespace fuzz {

// Takes parameter bytes from the front of the input; what remains is the payload.
class Input {
public:
    Input(const std::uint8_t *data, std::size_t size) : s_(reinterpret_cast<const char *>(data), size) {}
    std::uint8_t byte()
    {
        if (s_.empty())
            return 0;
        auto b = static_cast<std::uint8_t>(s_.front());
        s_.remove_prefix(1);
        return b;
    }
    std::string_view rest() const { return s_; }

private:
    std::string_view s_;
};

// Piece sizes for feeding a stream in parts: 0 means the whole input at once.
inline std::size_t piece(std::uint8_t b)
{
    return b == 0 ? 0 : (b % 17) + 1;
}

} // namespace fuzz
