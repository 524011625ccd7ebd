// What the JSON and msgpack codec files provide to context.cpp (internal to relay/).
#pragma once

#include "ferry/conf/result.hpp"
#include "ferry/relay/context.hpp"

#include <string>
#include <string_view>

namespace ferry::relay::detail {

void encode_json(const RequestContext &c, std::string &out);
void encode_msgpack(const RequestContext &c, std::string &out);
Result<void> decode_json(std::string_view in, ResponseContext &out);
Result<void> decode_msgpack(std::string_view in, ResponseContext &out);

} // namespace ferry::relay::detail
