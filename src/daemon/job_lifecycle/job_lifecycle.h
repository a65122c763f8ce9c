// The lifecycle of one job: the state it reports (v1::JobState) and why, the
// phase that says what the driver may still do, when it was created, started
// and ended, and the notice that it has ended. Every change goes through
// here and is HVDD_CHECKed against two tables (job_lifecycle.cc): a driver
// bug that would move a job out of a terminal state, or from RESETTING back
// to PENDING, stops the daemon where it happens instead of being reported.
// docs/architecture/job-lifecycle.md draws both.
//
// The state is what users see; the phase is finer and only moves forward:
//
//   kAwaitingHosts -> kPlanning -> kFinishing -> kStopping -> kEnded
//   (PENDING)         (PENDING, RUNNING,         (a terminal state)
//                      RESETTING)
//
// Threading: owned by one JobDriver and used on its loop thread, except
// Ended() and WaitEnded(), which any thread may call.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/job_events/event_log.h"
#include "daemon/loop/clock.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobLifecycle {
 public:
  enum class Phase {
    // PENDING until the first host set is known: there is nothing to plan on.
    kAwaitingHosts,
    // Generations are planned as hosts and workers come and go.
    kPlanning,
    // A member finished (exit 0): no generation is planned any more; the job
    // ends once its members are done.
    kFinishing,
    // A terminal state: the workers are being stopped.
    kStopping,
    // Every worker is gone and JOB_ENDED is out: Ended().
    kEnded,
  };

  // The tables every change is checked against.
  static bool Allowed(v1::JobState from, v1::JobState to);
  static bool Allowed(Phase from, Phase to);
  static bool IsTerminal(v1::JobState state);
  static const char* PhaseName(Phase phase);

  // A new job, PENDING and awaiting hosts, created now. STATE and JOB_ENDED
  // events go to `events`; `changed` runs after each change of state (a
  // checkpoint is due). `events` and `clock` outlive the lifecycle.
  JobLifecycle(EventLog& events, const Clock& clock, std::function<void()> changed);

  v1::JobState state() const { return state_; }
  // Why the job ended; empty before.
  const std::string& reason() const { return reason_; }
  Phase phase() const { return phase_; }
  bool Terminal() const { return phase_ >= Phase::kStopping; }
  // Hosts are known, no member finished, the job has not ended.
  bool MayPlan() const { return phase_ == Phase::kPlanning; }
  bool Finishing() const { return phase_ == Phase::kFinishing; }
  absl::Time created() const { return created_; }
  absl::Time started() const { return started_; }
  absl::Time ended_at() const { return ended_at_; }

  // The job starts now (JobDriver::Start).
  void MarkStarted();
  // Instead of MarkStarted, for a new lifecycle only: a job taken back after
  // a daemon restart reports `state` again (a STATE event, stamped
  // `generation`, unless it is PENDING), started at `started`. Not a
  // transition: the earlier run made it. A terminal state (the earlier run
  // was stopping the workers) puts the job in kStopping.
  void Restore(v1::JobState state, absl::Time started, int64_t generation);

  // The job reports `state` (PENDING, RUNNING or RESETTING) from now on: a
  // STATE event stamped `generation`. Nothing when it already does.
  void MoveTo(v1::JobState state, int64_t generation);
  // A host set is known. True the first time (kAwaitingHosts -> kPlanning);
  // false when hosts were known before or the job is past planning.
  bool HostsFound();
  // A member finished: -> kFinishing. False when it already was finishing.
  // Not once the job is terminal.
  bool StartFinishing();
  // The job ends `state` (SUCCEEDED, FAILED or CANCELLED) for `reason`: a
  // STATE event stamped `generation`, and kStopping. False, changing
  // nothing, when it already is terminal.
  bool End(v1::JobState state, const std::string& reason, int64_t generation);
  // Every worker of a stopping job is gone: JOB_ENDED (stamped `generation`)
  // closes the events, and Ended() is true.
  void Close(int64_t generation);

  bool Ended() const { return ended_.HasBeenNotified(); }
  // Waits until Ended() or `timeout` passed; whether it ended.
  bool WaitEnded(absl::Duration timeout) const {
    return ended_.WaitForNotificationWithTimeout(timeout);
  }

 private:
  void Advance(Phase to);
  // state_ = state, and the STATE event saying so.
  void Report(v1::JobState state, int64_t generation);

  EventLog& events_;
  const Clock& clock_;
  const std::function<void()> changed_;
  v1::JobState state_ = v1::PENDING;
  std::string reason_;
  Phase phase_ = Phase::kAwaitingHosts;
  const absl::Time created_;
  absl::Time started_;
  absl::Time ended_at_;
  absl::Notification ended_;  // notified once, by Close
};

}  // namespace horovodd::daemon
