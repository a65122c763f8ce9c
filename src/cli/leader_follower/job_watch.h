// A job's event stream (JobService.WatchJob) that outlives its daemon: when
// the stream breaks before the job's JOB_ENDED event, it is opened again
// through the LeaderFollower (a restarted daemon, another standby, the new
// leader) from the event after the last one seen, so nothing is shown twice.
// Shared by horovodrun (following its job) and horovodctl (watch, cancel --wait).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cli/leader_follower/leader_follower.h"
#include "horovodd.pb.h"

namespace horovodd::cli {

// Lets another thread end a watch (horovodrun's second Ctrl-C): the open
// stream is cancelled and not reopened.
class WatchStopper {
 public:
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  bool stopped() const ABSL_LOCKS_EXCLUDED(mu_);

  // The stream being read; false when already stopped (don't open it).
  bool Attach(grpc::ClientContext* context) ABSL_LOCKS_EXCLUDED(mu_);
  void Detach() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
};

struct WatchOutcome {
  // Set when the watch ended without the job's end: no daemon took it (the
  // message says which were tried), a daemon's own error (NOT_FOUND), or the
  // stopper.
  absl::Status status;
  bool ended = false;   // the JOB_ENDED event was seen
  v1::JobEvent end;     // that event
  std::string address;  // the daemon that answered last
};

// Streams `job_id`'s events from `from_seq` (0: the oldest kept) to
// `on_event` until JOB_ENDED. After a break, waits up to the follower's
// leader_wait for a daemon to take the watch again.
WatchOutcome WatchJobEvents(LeaderFollower& daemons, const std::string& job_id, uint64_t from_seq,
                            const std::function<void(const v1::JobEvent&)>& on_event,
                            WatchStopper* stopper = nullptr);

// A follower's give-up (or a lone unreachable daemon's failure) in a user's
// words: "cannot reach horovodd at ADDR: ...", else the list of every daemon
// tried; the daemon's own errors as they are.
absl::Status DescribeFailure(const FollowResult& result);

}  // namespace horovodd::cli
