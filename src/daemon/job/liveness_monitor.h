// When each worker of a job was last heard from (a heartbeat, an Attach, a
// rendezvous call), and which workers are to be declared lost: those that
// never connected within --start-timeout, went silent past
// --liveness-timeout, or did not join a generation within --elastic-timeout.
// It only decides; JobDriver kills the lost ones.
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/job/generation_planner.h"
#include "daemon/job/worker_table.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class LivenessMonitor {
 public:
  // The spec's --start-timeout, --liveness-timeout and --elastic-timeout.
  explicit LivenessMonitor(const v1::JobSpec& spec);

  // Worker `id` was started at `now`: its start timeout runs.
  void Launched(int64_t id, absl::Time now);
  // Worker `id`, taken back after a daemon restart at `now`, has until its
  // start timeout to reconnect (as a new one has), not its liveness timeout.
  void Reattached(int64_t id, absl::Time now);
  // Worker `id` was heard from at `now`.
  void Seen(int64_t id, absl::Time now);
  // Worker `id` never started after all.
  void Forget(int64_t id);

  struct Lost {
    int64_t worker_id;
    std::string reason;  // for its event, e.g. "silent for 6000 ms (--liveness-timeout 5s)"
  };
  // The workers with a process that are lost at `now`, in id order.
  std::vector<Lost> Check(absl::Time now, const WorkerTable& workers,
                          const GenerationPlanner& generations) const;
  // How often Check is worth running.
  absl::Duration period() const;

 private:
  struct Heard {
    absl::Time launched_at;
    absl::Time last_seen;       // launch, or the last time it was heard from
    bool heard_from = false;
    bool reattached = false;    // by a restarted daemon, not heard from since
  };

  const double start_timeout_s_;
  const double liveness_timeout_s_;
  const double elastic_timeout_s_;
  std::map<int64_t, Heard> heard_;
};

}  // namespace horovodd::daemon
