// X-Sendfile (internal to server/; http.middleware: "sendfile", RoadRunner's middleware of that name): a PHP
// response with an X-Sendfile header naming a file is answered with that file, sent by the server with
// sendfile(2) after the worker is free, with conditional and Range requests as static files get them; the
// bytes never go through the worker's pipe. PHP sees "X-Sendfile-Type: X-Sendfile" in every request then (the
// header Symfony's BinaryFileResponse and others look for); a client's own X-Sendfile-Type never reaches PHP.
#pragma once

#include "descriptors.hpp"
#include "handler.hpp"

#include "ferry/relay/context.hpp"

#include <optional>
#include <string>

namespace ferry::server::detail {

// The path of a response's X-Sendfile header, taken out of its headers; nullopt when it has none.
std::optional<std::string> take_sendfile(relay::ResponseContext &rc);

// Answers ex.request with the file at `path` for the worker's response `rc` (its status and other headers
// go with it): 404 when there is no such file, 403 when it is not a regular file or not readable, 503 when
// no descriptor is left (counted in `refusals`), each with a log line naming the worker and the path.
awaitable<After> send_named_file(Exchange &ex, const relay::ResponseContext &rc, int status,
                                 const std::string &path, int worker_pid, bool keep_alive,
                                 DescriptorRefusals &refusals);

} // namespace ferry::server::detail
