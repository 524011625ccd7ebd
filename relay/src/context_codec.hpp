// What the JSON and msgpack codec files provide to context.cpp (internal to relay/).
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/relay/context.hpp"
#include "ferry/relay/form.hpp"

#include <string>
#include <string_view>

namespace ferry::relay::detail {

void encode_json(const RequestContext &c, std::string &out);
void encode_msgpack(const RequestContext &c, std::string &out);
Result<void> decode_json(std::string_view in, ResponseContext &out);
Result<void> decode_msgpack(std::string_view in, ResponseContext &out);
void encode_form_json(const FormTree &form, std::string &out);
void encode_form_msgpack(const FormTree &form, std::string &out);

} // namespace ferry::relay::detail
