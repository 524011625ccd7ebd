// Value parsing and formatting: durations, sizes, integers, addresses, command words.
#include "values.hpp"

#include "ferry/base/text.hpp"
#include "schema.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <system_error>

namespace ferry::conf {

namespace {

using u128 = unsigned __int128;

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

} // namespace

Result<Duration> parse_duration(std::string_view text)
{
    constexpr u128 max_ns = static_cast<u128>(std::numeric_limits<std::int64_t>::max());
    const std::string_view s = text;
    if (s.empty()) {
        return fail("empty duration");
    }
    if (s[0] == '-') {
        return fail("negative durations are not allowed");
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
                return fail("duration too large");
            }
        }
        total *= 1'000'000'000;
        if (total > max_ns) {
            return fail("duration too large");
        }
        return Duration(static_cast<std::int64_t>(total / 1'000'000));
    }
    std::size_t i = s[0] == '+' ? 1 : 0;
    if (i == s.size()) {
        return fail("missing number");
    }
    while (i < s.size()) {
        u128 whole = 0;
        const std::size_t start = i;
        for (; i < s.size() && is_digit(s[i]); ++i) {
            whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
            if (whole > max_ns) {
                return fail("duration too large");
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
            return fail("expected a number at \"" + std::string(s.substr(start)) + "\"");
        }
        const std::size_t unit_start = i;
        while (i < s.size() && !is_digit(s[i]) && s[i] != '.') {
            ++i;
        }
        const std::string_view unit_text = s.substr(unit_start, i - unit_start);
        if (unit_text.empty()) {
            return fail("missing unit after \"" + std::string(s.substr(start, i - start)) +
                        "\"; valid units are h, m, s, ms, us, ns");
        }
        const std::uint64_t unit = duration_unit(unit_text);
        if (unit == 0) {
            return fail("unknown unit \"" + std::string(unit_text) +
                        "\"; valid units are h, m, s, ms, us, ns");
        }
        total += whole * unit + frac * unit / scale;
        if (total > max_ns) {
            return fail("duration too large");
        }
    }
    // Round up to whole milliseconds, so that a small non-zero duration never becomes 0.
    return Duration(static_cast<std::int64_t>((total + 999'999) / 1'000'000));
}

namespace detail {

Parsed<std::uint64_t> parse_uint(std::string_view text)
{
    std::uint64_t value = 0;
    const char *const end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec == std::errc::result_out_of_range) {
        return Rejection{Rejection::Why::out_of_range, {}, {}};
    }
    if (text.empty() || ec != std::errc() || ptr != end) {
        return Rejection{};
    }
    return value;
}

Parsed<std::uint64_t> parse_size(std::string_view text, std::uint64_t bare_unit)
{
    const auto invalid = [](std::string reason) { return Rejection{Rejection::Why::invalid, reason, {}}; };
    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i])) {
        ++i;
    }
    if (i == 0) {
        return invalid("missing number");
    }
    const Parsed<std::uint64_t> number = parse_uint(text.substr(0, i));
    if (!number) {
        return invalid("size too large");
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
        return invalid("unknown size unit \"" + std::string(text.substr(j)) +
                       "\"; valid units are B, KB, MB, GB (1 KB = 1024 bytes)");
    }
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(*number, multiplier, &bytes)) {
        return invalid("size too large");
    }
    return bytes;
}

Parsed<Address> parse_address(std::string_view text)
{
    constexpr std::string_view port_expected = "a port number from 0 to 65535 after the \":\"";
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
        return Rejection{Rejection::Why::invalid, "no port", {}};
    }
    std::string_view host = text.substr(0, colon);
    if (host.empty()) {
        host = "0.0.0.0";
    }
    const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
    if (!bracketed && host.find_first_of(":[] \t/") != std::string_view::npos) {
        return Rejection{
            Rejection::Why::invalid, "invalid host (write IPv6 addresses in brackets: \"[::1]:8080\")", {}};
    }
    const Parsed<std::uint64_t> port = parse_uint(text.substr(colon + 1));
    if (!port) {
        return Rejection{Rejection::Why::invalid, {}, port_expected};
    }
    if (*port > 65535) {
        return Rejection{Rejection::Why::out_of_range, {}, port_expected};
    }
    if (bracketed) {
        host = host.substr(1, host.size() - 2);
    }
    return Address{std::string(host), static_cast<std::uint16_t>(*port)};
}

std::vector<std::string> split_words(std::string_view text)
{
    std::vector<std::string> words;
    std::size_t i = 0;
    while (i < text.size()) {
        if (text[i] == ' ' || text[i] == '\t') {
            ++i;
            continue;
        }
        const std::size_t end = std::min(text.find_first_of(" \t", i), text.size());
        words.emplace_back(text.substr(i, end - i));
        i = end;
    }
    return words;
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

std::string Address::to_string() const
{
    const std::string shown = host.find(':') == std::string::npos ? host : "[" + host + "]";
    return shown + ":" + std::to_string(port);
}

std::size_t schema::detail::edit_distance(std::string_view a, std::string_view b)
{
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) {
        d[i][0] = i;
    }
    for (std::size_t j = 0; j <= b.size(); ++j) {
        d[0][j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.size()][b.size()];
}

std::optional<bool> schema::yaml_bool(std::string_view text)
{
    if (text == "true" || text == "True" || text == "TRUE") {
        return true;
    }
    if (text == "false" || text == "False" || text == "FALSE") {
        return false;
    }
    return std::nullopt;
}

} // namespace ferry::conf
