// Value parsing and formatting for the schema's key kinds (schema.cpp): sizes, integers, addresses, commands.
// Durations are parsed by the public parse_duration() (config.hpp), also defined in values.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/system/result.hpp>

#include "ferry/conf/config.hpp"

namespace ferry::conf::detail {

// Why a text is not a valid value. The schema turns it into `"<value>" is not a valid value: <reason>
// (expected ...)` or `"<value>" is out of range (expected ...)`.
struct Rejection {
    enum class Why { invalid, out_of_range };
    Why why = Why::invalid;
    std::string reason;        // "" = nothing to add to what is expected
    std::string_view expected; // "" = what the key expects; else what this part of the value expects
};
template <typename T> using Parsed = boost::system::result<T, Rejection>;

// A non-negative decimal integer without sign or spaces (out of range beyond 2^64 - 1).
Parsed<std::uint64_t> parse_uint(std::string_view text);

// "64KB", "10MB", "1GB", "512B", "1 MiB" (1 KB = 1024 bytes, units case-insensitive); a bare integer
// is multiplied by `bare_unit`. Garbage and overflow are invalid, with a reason.
Parsed<std::uint64_t> parse_size(std::string_view text, std::uint64_t bare_unit);

// "host:port": an empty host is "0.0.0.0", an IPv6 host is written in brackets ("[::1]:8080") and kept
// without them.
Parsed<Address> parse_address(std::string_view text);

// The words of `text` separated by spaces and tabs (a command line given as one string).
std::vector<std::string> split_words(std::string_view text);

// "60s" when a whole number of seconds, otherwise "500ms". parse_duration(format_duration(d)) == d.
std::string format_duration(Duration d);

} // namespace ferry::conf::detail
