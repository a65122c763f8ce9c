// How often each worker of a job heartbeats. The daemon asks a job's workers
// for it in every message of their Attach streams (rpc/worker_service.h's
// HeartbeatSchedule), and the liveness monitor reads a check of its own that
// runs more than an interval late as the daemon's stall, not the workers'
// silence (liveness_monitor.h).
//
// Every heartbeat costs the daemon a read and a post to the job's loop, so a
// big job heartbeats less often: the job's workers together send at most
// kHeartbeatsPerSecond, never more often than every kMinHeartbeatInterval
// each (500 ms up to 1,000 workers). The liveness check still has to see
// several heartbeats per --liveness-timeout, so the interval stays at most a
// quarter of it, even under the minimum: one late heartbeat on a loaded
// machine is no alarm.
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

inline constexpr int kHeartbeatsPerSecond = 2000;
inline constexpr absl::Duration kMinHeartbeatInterval = absl::Milliseconds(500);

// For a job of up to `workers` workers judged by `liveness_timeout_s` (no
// cap when it is not positive). Whole milliseconds, at least 1.
absl::Duration HeartbeatInterval(int64_t workers, double liveness_timeout_s);

// For a job of `spec`, at the most workers it may grow to (its rate must fit
// the budget then).
absl::Duration HeartbeatIntervalOf(const v1::JobSpec& spec);

}  // namespace horovodd::daemon
