// Reading a small text file the user names (the configuration file, a .env file): a regular file only (a
// FIFO would block, /dev/zero fill memory, a directory fail to read) of at most `max` bytes. Private to
// ferry_conf.
#pragma once

#include "ferry/base/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::conf::detail {

// The file's bytes. Errors begin with `prefix` ("x.env: cannot read ... : "), then the system's reason, "it
// is a FIFO, not a regular file", or "it is N bytes, more than the M MiB <kind> may have".
Result<std::string> read_regular_file(const std::string &path, std::uint64_t max, const std::string &prefix,
                                      std::string_view kind);

} // namespace ferry::conf::detail
