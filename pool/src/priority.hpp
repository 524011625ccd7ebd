// CPU priority of recycling (Options::recycle_priority): a replacement for a worker that still serves boots
// under SCHED_IDLE (set as soon as its exec is done), so that its PHP start-up (tens of ms of CPU) runs on
// CPU time nobody else wants instead of taking it from the workers that serve; the server restores
// SCHED_OTHER after the handshake. A retired worker exits under SCHED_IDLE too. Leaving SCHED_IDLE needs
// CAP_SYS_NICE or an RLIMIT_NICE that allows the worker's nice value (sched(7)); can_restore() tells whether
// this process may do it.
#pragma once

namespace ferry::pool::detail {

// Whether a task of ours put under SCHED_IDLE can be given SCHED_OTHER again. Tried on a short-lived thread
// of this process (same credentials, nice value and limits as the workers it starts); raises the soft
// RLIMIT_NICE to the hard one first when that is what it takes.
bool can_restore();

// `pid` (one of our workers) under SCHED_IDLE / back under SCHED_OTHER; false with errno on failure.
bool set_idle(int pid) noexcept;
bool set_normal(int pid) noexcept;

} // namespace ferry::pool::detail
