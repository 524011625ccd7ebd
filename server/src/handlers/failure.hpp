// What a client is told when its request got no response from PHP (a pool::Outcome other than ok): one
// mapping for the PHP handler, the WebSocket upgrade and SSE (an HTTP status and the body shown), and for a
// WebSocket message event (a close code). nginx's rule: 502 for a broken upstream, 503 when there is none,
// 504 when it is too slow; the cause itself goes to the log, never to the client.
#pragma once

#include "ferry/pool/pool.hpp"

#include <cstdint>
#include <string_view>

namespace ferry::server::detail {

struct Failure {
    int status = 0;               // 0: nothing is answered (the client is gone, the request was cancelled)
    std::string_view text;        // the error page's words ("" for worker_error: the configured page is bare)
    std::uint16_t close_code = 0; // a WebSocket connection whose message event failed closes with this
};

// `internal_error_code`: http.internal_error_code, what a worker's ERROR frame is answered with.
Failure failure_for(pool::Outcome outcome, int internal_error_code);

} // namespace ferry::server::detail
