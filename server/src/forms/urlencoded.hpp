// application/x-www-form-urlencoded bodies (internal to server/): the fields of a form POST, by PHP's rules.
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/relay/form.hpp"

#include <string_view>

namespace ferry::server::detail {

// Adds the fields of `body` ("a=1&b%5B%5D=2+3") to `form`: pairs split at "&", name and value at the first
// "=" (none: an empty value), "+" is a space, %XX is decoded and an invalid escape kept as it is (as PHP
// does); empty pairs are skipped. Fails when the form's limits are passed.
Result<void> parse_urlencoded(std::string_view body, relay::FormTree &form);

// Whether a Content-Type is application/x-www-form-urlencoded (parameters ignored, case-insensitive).
bool is_urlencoded(std::string_view content_type);

} // namespace ferry::server::detail
