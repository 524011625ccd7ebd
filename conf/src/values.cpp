// Value parsing: durations, sizes, integers, ${VAR} expansion.
#include "values.hpp"

#include <charconv>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <system_error>

namespace ferry::conf {

namespace {

using u128 = unsigned __int128;

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool is_name_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool is_name_char(char c)
{
    return is_name_start(c) || is_digit(c);
}

char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char &c : out) {
        c = lower(c);
    }
    return out;
}

// Nanoseconds per unit, 0 when unknown. Units are case-sensitive, as in Go's time.ParseDuration.
std::uint64_t duration_unit(std::string_view unit)
{
    if (unit == "ns") {
        return 1;
    }
    if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") { // "µs" (micro sign or Greek mu)
        return 1'000;
    }
    if (unit == "ms") {
        return 1'000'000;
    }
    if (unit == "s") {
        return 1'000'000'000;
    }
    if (unit == "m") {
        return 60'000'000'000;
    }
    if (unit == "h") {
        return 3'600'000'000'000;
    }
    return 0;
}

// Index of the '}' closing the "${" at `open`, or npos.
std::size_t closing_brace(std::string_view s, std::size_t open)
{
    int depth = 0;
    for (std::size_t j = open; j < s.size(); ++j) {
        if (s[j] == '$' && j + 1 < s.size() && s[j + 1] == '{') {
            ++depth;
            ++j;
        } else if (s[j] == '}' && --depth == 0) {
            return j;
        }
    }
    return std::string_view::npos;
}

std::string expand(std::string_view s, const EnvLookup &env)
{
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t open = s.find("${", i);
        if (open == std::string_view::npos) {
            out.append(s.substr(i));
            break;
        }
        out.append(s.substr(i, open - i));
        const std::size_t close = closing_brace(s, open);
        if (close == std::string_view::npos) {
            throw std::invalid_argument("unterminated \"${\" at \"" + std::string(s.substr(open, 24)) +
                                        (s.size() - open > 24 ? "...\"" : "\""));
        }
        const std::string_view inner = s.substr(open + 2, close - open - 2);
        const std::size_t sep = inner.find(":-");
        const std::string_view name = inner.substr(0, sep);
        bool valid = !name.empty() && is_name_start(name[0]);
        for (char c : name) {
            valid = valid && is_name_char(c);
        }
        if (!valid) {
            throw std::invalid_argument("invalid variable reference \"${" + std::string(inner) +
                                        "}\" (use \"${NAME}\" or \"${NAME:-default}\")");
        }
        std::optional<std::string> value;
        if (env) {
            value = env(std::string(name));
        }
        if (sep != std::string_view::npos) {
            if (value && !value->empty()) {
                out += *value;
            } else {
                out += expand(inner.substr(sep + 2), env);
            }
        } else if (value) {
            out += *value;
        }
        i = close + 1;
    }
    return out;
}

} // namespace

Duration parse_duration(const std::string &text)
{
    constexpr u128 max_ns = static_cast<u128>(std::numeric_limits<std::int64_t>::max());
    const std::string_view s = text;
    if (s.empty()) {
        throw std::invalid_argument("empty duration");
    }
    if (s[0] == '-') {
        throw std::invalid_argument("negative durations are not allowed");
    }
    u128 total = 0;
    bool all_digits = true;
    for (char c : s) {
        all_digits = all_digits && is_digit(c);
    }
    if (all_digits) { // bare integer: seconds
        for (char c : s) {
            total = total * 10 + static_cast<unsigned>(c - '0');
            if (total > max_ns) {
                throw std::invalid_argument("duration too large");
            }
        }
        total *= 1'000'000'000;
        if (total > max_ns) {
            throw std::invalid_argument("duration too large");
        }
        return Duration(static_cast<std::int64_t>(total / 1'000'000));
    }
    std::size_t i = s[0] == '+' ? 1 : 0;
    if (i == s.size()) {
        throw std::invalid_argument("missing number");
    }
    while (i < s.size()) {
        u128 whole = 0;
        const std::size_t start = i;
        for (; i < s.size() && is_digit(s[i]); ++i) {
            whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
            if (whole > max_ns) {
                throw std::invalid_argument("duration too large");
            }
        }
        const bool has_whole = i > start;
        u128 frac = 0;
        u128 scale = 1;
        bool has_frac = false;
        if (i < s.size() && s[i] == '.') {
            ++i;
            const std::size_t frac_start = i;
            for (; i < s.size() && is_digit(s[i]); ++i) {
                if (scale < 1'000'000'000'000'000'000ull) { // further digits are below a nanosecond
                    frac = frac * 10 + static_cast<unsigned>(s[i] - '0');
                    scale *= 10;
                }
            }
            has_frac = i > frac_start;
        }
        if (!has_whole && !has_frac) {
            throw std::invalid_argument("expected a number at \"" + std::string(s.substr(start)) + "\"");
        }
        const std::size_t unit_start = i;
        while (i < s.size() && !is_digit(s[i]) && s[i] != '.') {
            ++i;
        }
        const std::string_view unit_text = s.substr(unit_start, i - unit_start);
        if (unit_text.empty()) {
            throw std::invalid_argument("missing unit after \"" + std::string(s.substr(start, i - start)) +
                                        "\"; valid units are h, m, s, ms, us, ns");
        }
        const std::uint64_t unit = duration_unit(unit_text);
        if (unit == 0) {
            throw std::invalid_argument("unknown unit \"" + std::string(unit_text) +
                                        "\"; valid units are h, m, s, ms, us, ns");
        }
        total += whole * unit + frac * unit / scale;
        if (total > max_ns) {
            throw std::invalid_argument("duration too large");
        }
    }
    // Round up to whole milliseconds, so that a small non-zero duration never becomes 0.
    return Duration(static_cast<std::int64_t>((total + 999'999) / 1'000'000));
}

std::string expand_env(const std::string &text, const EnvLookup &env)
{
    return expand(text, env);
}

namespace detail {

std::uint64_t parse_uint(std::string_view text)
{
    std::uint64_t value = 0;
    const char *const end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec == std::errc::result_out_of_range) {
        throw std::out_of_range("number too large");
    }
    if (text.empty() || ec != std::errc() || ptr != end) {
        throw std::invalid_argument("not a non-negative integer");
    }
    return value;
}

std::uint64_t parse_size(std::string_view text, std::uint64_t bare_unit)
{
    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i])) {
        ++i;
    }
    if (i == 0) {
        throw std::invalid_argument("missing number");
    }
    std::uint64_t number = 0;
    try {
        number = parse_uint(text.substr(0, i));
    } catch (const std::out_of_range &) {
        throw std::invalid_argument("size too large");
    }
    std::size_t j = i;
    while (j < text.size() && text[j] == ' ') {
        ++j;
    }
    const std::string unit = lower(text.substr(j));
    std::uint64_t multiplier = 0;
    if (j == i && unit.empty()) {
        multiplier = bare_unit;
    } else if (unit == "b") {
        multiplier = 1;
    } else if (unit == "k" || unit == "kb" || unit == "kib") {
        multiplier = 1ull << 10;
    } else if (unit == "m" || unit == "mb" || unit == "mib") {
        multiplier = 1ull << 20;
    } else if (unit == "g" || unit == "gb" || unit == "gib") {
        multiplier = 1ull << 30;
    } else if (unit == "t" || unit == "tb" || unit == "tib") {
        multiplier = 1ull << 40;
    } else {
        throw std::invalid_argument("unknown size unit \"" + std::string(text.substr(j)) +
                                    "\"; valid units are B, KB, MB, GB (1 KB = 1024 bytes)");
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(number, multiplier, &bytes)) {
        throw std::invalid_argument("size too large");
    }
    return bytes;
}

std::string format_duration(Duration d)
{
    const auto ms = d.count();
    if (ms % 1000 == 0) {
        return std::to_string(ms / 1000) + "s";
    }
    return std::to_string(ms) + "ms";
}

} // namespace detail

} // namespace ferry::conf
