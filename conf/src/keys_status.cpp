// status: RoadRunner's health checks (its status plugin): GET /health and /ready on `address`, answered
// `unavailable_status_code` when the answer is no; Ferry's `first_byte_timeout` closes a silent connection.
// The section's presence turns it on.
#include "keys.hpp"

namespace ferry::conf::keys {

const schema::Table<StatusConfig> &status()
{
    using namespace schema;
    static const Table<StatusConfig> table{
        {
            address("address", &StatusConfig::address)
                .warned(every_interface)
                .described("Where `GET /health` and `GET /ready` (`?plugin=http`) are served; every "
                           "interface (`:2114`) is warned. The same address as `metrics.address`: one "
                           "listener answers both (its connections counted as status's)."),
            integer("unavailable_status_code", &StatusConfig::unavailable_status_code,
                    "an HTTP status code from 400 to 599", 400, 599)
                .described("The status of a health or readiness answer that says no."),
            duration("first_byte_timeout", &StatusConfig::first_byte_timeout)
                .checked(positive_duration)
                .described("Ferry's own: as `rpc.first_byte_timeout`."),
        },
        {},
        nullptr,
        &StatusConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
