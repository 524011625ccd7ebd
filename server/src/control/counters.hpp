// What the server counts that no one loop or listener owns (internal to server/): the limits' refusals and
// the budgets /metrics shows, the control listeners' closes, the descriptor refusals. One object made by
// run() and reached through every loop's SharedState and the control listeners: no process state in statics.
#pragma once

#include "broker/counters.hpp"
#include "compress/policy.hpp"
#include "control/conn_slots.hpp"
#include "control/limit_metrics.hpp"
#include "descriptors.hpp"

namespace ferry::server::detail {

struct ServerCounters {
    LimitCounters limits;
    ControlCounters control;
    DescriptorRefusals descriptors;
    compress::Counters compression; // http.compression: responses compressed, streams being compressed
    broker::Counters broker;        // websockets.broker: messages across nodes, its connection
};

} // namespace ferry::server::detail
