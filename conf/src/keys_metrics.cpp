// metrics: RoadRunner's metrics plugin: Prometheus text format at GET /metrics on `address`. The section's
// presence turns it on; `collect` (application-defined metrics over RPC) is not supported.
#include "keys.hpp"

namespace ferry::conf::keys {

const schema::Table<MetricsConfig> &metrics()
{
    using namespace schema;
    static const Table<MetricsConfig> table{
        {
            address("address", &MetricsConfig::address)
                .warned(every_interface)
                .described("Where `GET /metrics` is served; every interface (`:2112`) is warned. The same "
                           "address as `status.address`: one listener answers both."),
            duration("first_byte_timeout", &MetricsConfig::first_byte_timeout)
                .checked(positive_duration)
                .described("Ferry's own: as `rpc.first_byte_timeout`."),
        },
        {"collect"},
        nullptr,
        &MetricsConfig::enabled,
    };
    return table;
}

} // namespace ferry::conf::keys
