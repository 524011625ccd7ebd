// Internal helpers of ferry_conf: value parsing and formatting shared by the loader and dump().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/conf/config.hpp"

namespace ferry::conf::detail {

// "64KB", "10MB", "1GB", "512B", "1 MiB" (1 KB = 1024 bytes, units case-insensitive); a bare integer
// is multiplied by `bare_unit`. Throws std::invalid_argument (with a reason) on garbage or overflow.
std::uint64_t parse_size(std::string_view text, std::uint64_t bare_unit);

// A non-negative decimal integer without sign or spaces. Throws std::invalid_argument / std::out_of_range.
std::uint64_t parse_uint(std::string_view text);

// "60s" when a whole number of seconds, otherwise "500ms". parse_duration(format_duration(d)) == d.
std::string format_duration(Duration d);

} // namespace ferry::conf::detail
