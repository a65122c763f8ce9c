// When each worker of a job was last heard from (a heartbeat, an Attach, a
// rendezvous call), and which workers are to be declared lost: those that did
// not reach their first rendezvous within --start-timeout of their launch (as
// Horovod bounds a new worker's start), or went silent past
// --liveness-timeout. --elastic-timeout is not theirs: it bounds only the
// wait for --min-np slots (JobHosts). It decides, and while it watches a
// job it wakes itself to check; the driver kills the lost ones.
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/loop/event_loop.h"
#include "daemon/workers/worker_table.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class LivenessMonitor {
 public:
  // How long a worker that closed its Attach stream may stay silent: the
  // runtime's daemon grace (DaemonClient), after which it ends itself.
  static constexpr absl::Duration kDetachedGrace = absl::Seconds(30);

  // The spec's --start-timeout and --liveness-timeout.
  explicit LivenessMonitor(const v1::JobSpec& spec);

  // Worker `id` was started at `now`: its start timeout runs.
  void Launched(int64_t id, absl::Time now);
  // Worker `id`, taken back after a daemon restart at `now`, has its
  // liveness timeout to reconnect.
  void Reattached(int64_t id, absl::Time now);
  // Worker `id` was heard from at `now`.
  void Seen(int64_t id, absl::Time now);
  // Worker `id` asked for a rendezvous: it has started (--start-timeout is met).
  void AskedRendezvous(int64_t id);
  // Worker `id` never started after all.
  void Forget(int64_t id);
  // The daemon did not run for `stalled` (its loop, or the whole process or
  // machine, was stopped), and what its workers sent meanwhile is only now
  // being read. That time is no one's silence: it is taken off every silence
  // and start it fell into, so a daemon that wakes from a stall does not kill
  // the workers it could not hear, and a silent one is still found however
  // often the daemon stalls.
  void Deaf(absl::Duration stalled);

  struct Lost {
    int64_t worker_id;
    std::string reason;  // for its event, e.g. "silent for 6000 ms (--liveness-timeout 5s)"
    absl::Time last_seen = absl::InfinitePast();  // heard from last (or launched)
  };
  // The workers with a process that are lost at `now`, in id order.
  std::vector<Lost> Check(absl::Time now, const WorkerTable& workers) const;
  // How often Check is worth running.
  absl::Duration period() const;

  using LostHandler = std::function<void(const Lost&)>;
  using StalledHandler = std::function<void(absl::Duration stalled)>;
  // Checks `workers` now and every period() after on `loop`'s clock, until
  // Stop: `on_lost` gets each lost worker, on the loop, at every check until
  // its process is gone. A check that runs more than a heartbeat interval
  // late finds the daemon was stalled: the lateness is Deaf time, and
  // `on_stalled` is told how long the loop did not run. `loop` and
  // `workers` outlive the watch.
  void Watch(EventLoop& loop, const WorkerTable& workers, LostHandler on_lost,
             StalledHandler on_stalled);
  void Stop();

 private:
  struct Heard {
    absl::Time launched_at;
    absl::Time last_seen;  // launch, or the last time it was heard from
    bool heard_from = false;
    bool asked_rendezvous = false;
    bool reattached = false;  // by a restarted daemon, not heard from since
    // deaf_ when it was launched and when it was last seen.
    absl::Duration deaf_at_launch;
    absl::Duration deaf_at_seen;
  };

  void CheckNow();

  const double start_timeout_s_;
  const double liveness_timeout_s_;
  // The job's workers' (heartbeat_interval.h): a check later than one
  // interval past its due time finds the daemon was stalled.
  const absl::Duration heartbeat_interval_;
  std::map<int64_t, Heard> heard_;
  absl::Duration deaf_;  // the daemon's stalls so far, in all
  // While it watches (Watch until Stop).
  EventLoop* loop_ = nullptr;
  const WorkerTable* workers_ = nullptr;
  LostHandler on_lost_;
  StalledHandler on_stalled_;
  EventLoop::TimerId timer_ = 0;
  absl::Time last_check_ = absl::InfinitePast();
};

}  // namespace horovodd::daemon
