#include "daemon/workers/heartbeat_interval.h"

#include <algorithm>

namespace horovodd::daemon {

absl::Duration HeartbeatInterval(int64_t workers, double liveness_timeout_s) {
  // workers / kHeartbeatsPerSecond seconds, in milliseconds.
  const int64_t budget_ms =
      (std::max<int64_t>(workers, 1) * 1000 + kHeartbeatsPerSecond - 1) / kHeartbeatsPerSecond;
  absl::Duration interval = std::max(absl::Milliseconds(budget_ms), kMinHeartbeatInterval);
  if (liveness_timeout_s > 0) {
    // Four heartbeats per timeout: a worker is declared lost only after
    // missing several in a row, never for one late one on a loaded machine.
    interval = std::min(interval, absl::Seconds(liveness_timeout_s) / 4);
  }
  return std::max(absl::Floor(interval, absl::Milliseconds(1)), absl::Milliseconds(1));
}

absl::Duration HeartbeatIntervalOf(const v1::JobSpec& spec) {
  return HeartbeatInterval(std::max<int64_t>(spec.num_proc(), spec.max_np()),
                           spec.liveness_timeout_seconds());
}

}  // namespace horovodd::daemon
