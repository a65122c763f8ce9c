// The hosts of one job: what discovery says of them (the spec's script or
// Slurm allocation, polled on its own thread by a DiscoveryPoller, or the
// hosts the spec lists), each host's failures, cooldowns and drains
// (discovery::HostManager), and the two timers the hosts set: the wake-up
// when a host's cooldown ends, and --elastic-timeout while the job has fewer
// slots than it needs. It records what it sees in the job's events and tells
// the driver when a new plan may be due or the wait for slots has run out;
// the driver plans.
//
// Threading: owned by one JobDriver and used on its loop thread. The poller
// runs discovery on its own thread and posts each answer to the loop.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/job_events/event_recorder.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/loop/event_loop.h"
#include "discovery/host_manager.h"
#include "discovery/host_source.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class DiscoveryPoller;

class JobHosts {
 public:
  // A new plan may be due, for `cause` (which the generation's event
  // names). `detected`: hosts were lost, changed or drained, so a reset that
  // follows counts from now (ResetHistory::Detected); otherwise the plan may
  // only grow the job or change nothing (every discovery run, an undrained
  // host, a cooldown's end, a failed launch).
  using ChangedHandler = std::function<void(const std::string& cause, bool detected)>;
  // The job waited --elastic-timeout for the slots it needs: it fails, `why`.
  using TimedOutHandler = std::function<void(const std::string& why)>;

  // Everything given outlives the hosts; the handlers run on `loop`.
  JobHosts(const v1::JobSpec& spec, EventLoop& loop, JobLifecycle& lifecycle,
           EventRecorder& recorder, ChangedHandler on_changed, TimedOutHandler on_timed_out);
  ~JobHosts();

  discovery::HostManager& manager() { return manager_; }
  const discovery::HostManager& manager() const { return manager_; }

  // Discovery starts: the poller of a script or Slurm allocation, or the
  // listed hosts at once (which may plan the job's first generation now).
  void StartDiscovery();
  // Stops polling, waiting for a discovery run in progress; before the loop
  // stops (its answers would have nowhere to go).
  void StopDiscovery();

  // Operator control of one host: drained, it takes no workers.
  void SetDrained(const std::string& host, bool drained);
  // A worker on `host` failed because of `why` at `now`: Horovod blacklists
  // the host, here for a cooldown. What to say about it ("host a is
  // blacklisted for 10000 ms (cooldown 1)").
  std::string Blacklist(const std::string& host, const std::string& why, absl::Time now);
  // A worker could not be started on `host`: the host sits out a cooldown,
  // and a new plan is due once the closure running now is done.
  void LaunchFailed(const std::string& host, const absl::Status& status);
  // Wakes up when the next cooldown ends: a new plan may use the host again.
  void ScheduleCooldownWakeup();

  // Only `available` of the `needed` slots (-np at the job's start, --min-np
  // later): the job fails unless enough come within --elastic-timeout.
  // Nothing when the wait already runs.
  void ArmBelowMinTimer(int available, int needed);
  // Enough slots: the wait is over.
  void CancelBelowMinTimer();
  // The job ended: no more wake-ups.
  void StopTimers();

 private:
  void OnHosts(absl::StatusOr<discovery::HostSet> hosts);

  const v1::JobSpec& spec_;
  EventLoop& loop_;
  JobLifecycle& lifecycle_;
  EventRecorder& recorder_;
  const ChangedHandler on_changed_;
  const TimedOutHandler on_timed_out_;
  discovery::HostManager manager_;
  // Why the last discovery run failed; empty once one succeeded.
  std::string last_discovery_error_;
  EventLoop::TimerId below_min_timer_ = 0;
  EventLoop::TimerId cooldown_timer_ = 0;
  std::unique_ptr<DiscoveryPoller> poller_;
};

// The blacklist cooldown of `spec` (--blacklist-cooldown-range LO HI); with no
// range (HI 0), Horovod's default: blacklisted for the rest of the job.
discovery::CooldownPolicy CooldownPolicyOf(const v1::JobSpec& spec);

}  // namespace horovodd::daemon
