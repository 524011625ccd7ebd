// The rules a parsed request head must keep (internal to server/): Host, target form, Content-Length and
// Transfer-Encoding (RFC 9112 §3.2, §6.1, §6.3). The parser applies them once the head is complete.
#pragma once

#include "ferry/server/http_parser.hpp"

#include <string>

namespace ferry::server::detail {

// Sets r.form (and r.authority for absolute-form), or fails with the status to answer. `last_valid_host` is
// the last Host value found valid on this connection: a repeated Host is not checked again.
HttpResult<void> check_head(Request &r, std::string &last_valid_host);

} // namespace ferry::server::detail
