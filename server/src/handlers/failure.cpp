#include "failure.hpp"

#include "ws/frame.hpp"

namespace ferry::server::detail {

Failure failure_for(pool::Outcome outcome, int internal_error_code)
{
    using pool::Outcome;
    namespace cs = ws::close_status;
    switch (outcome) {
    case Outcome::worker_error:
        return {internal_error_code, {}, cs::internal};
    case Outcome::bad_response:
        return {502, "the application's response could not be relayed", cs::internal};
    case Outcome::worker_crashed:
        return {502, "the worker handling this request died", cs::internal};
    case Outcome::timed_out:
        return {504, "the application did not answer in time", cs::internal};
    case Outcome::no_worker: // RFC 6455 §7.4.1's 1013: the client may try again later
        return {503, "no PHP worker is available, try again later", cs::try_again_later};
    case Outcome::ok:
    case Outcome::client_gone:
        break;
    }
    return {};
}

} // namespace ferry::server::detail
