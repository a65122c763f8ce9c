// What this rank is doing, for the daemon (its heartbeats report it): the
// collectives its engines have submitted and not completed, how many they
// completed in the current generation, and its commits (a step is the
// interval between two commits). The engines record submissions and
// completions; the runtime records generations and commits; the daemon
// client's heartbeat thread takes a Snapshot. One per runtime, shared by the
// global engine and every process set's (each under its set's id), and held
// by whoever reads it, so it outlives the engines. Thread-safe; each call
// holds its mutex briefly.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker_runtime/comm/peer_wait.h"

namespace horovodd::internal {

struct CollectiveWaitInfo {
  std::string name;       // as the user named it (UserFacingName)
  std::string operation;  // "allreduce", "barrier", ...
  int process_set = 0;
  absl::Time since;  // submitted
};

struct ActivitySnapshot {
  std::optional<CollectiveWaitInfo> waiting;  // the oldest pending collective
  int pending = 0;
  int64_t completed = 0;  // in the current generation
  int64_t last_commit = 0;
  std::optional<absl::Time> last_commit_at;  // in this runtime
  // Mean interval between the recent commits of this generation; zero with
  // fewer than two.
  absl::Duration step = absl::ZeroDuration();
  // Of `step`, the mean time with at least one collective pending.
  absl::Duration step_wait = absl::ZeroDuration();
  // The peer the global set's transport is blocked on now, if any.
  std::optional<PeerWait::Waiting> waiting_on;
};

struct Request;

// What `request` does, as reports name it: "allreduce", "broadcast",
// "allgather", "join", or an opaque request's operation ("alltoall",
// "barrier", ...; its first word).
std::string ActivityOperationOf(const Request& request);

class ActivityTracker {
 public:
  // Commit intervals the step time averages over.
  static constexpr size_t kStepWindow = 8;

  // A collective named `name` (the engine's name) was queued on process set `set`.
  void Submitted(int set, const std::string& name, const std::string& operation, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);
  // It completed (`ok`) or failed at `now`; either way it waits no more.
  void Completed(int set, const std::string& name, bool ok, absl::Time now)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The rank joined a new generation: the completed count and step times start over.
  void NewGeneration() ABSL_LOCKS_EXCLUDED(mu_);
  // The rank's state saw its `commits`-th commit.
  void Committed(int64_t commits, absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  ActivitySnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // Where the global set's transport records the peer it waits for (the
  // runtime hands it to each generation's ring); read by Snapshot.
  const std::shared_ptr<PeerWait>& peer_wait() const { return peer_wait_; }

 private:
  struct Pending {
    std::string operation;
    absl::Time since;
  };
  const std::shared_ptr<PeerWait> peer_wait_ = std::make_shared<PeerWait>();
  mutable absl::Mutex mu_;
  std::map<std::pair<int, std::string>, Pending> pending_ ABSL_GUARDED_BY(mu_);
  int64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_commit_ ABSL_GUARDED_BY(mu_) = 0;
  // This generation's recent commit times, oldest first (at most kStepWindow + 1).
  std::deque<absl::Time> commit_times_ ABSL_GUARDED_BY(mu_);
  // The time spent with a collective pending: the intervals closed so far,
  // the open one's start, and the total at each of commit_times_.
  absl::Duration waited_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Time busy_since_ ABSL_GUARDED_BY(mu_);
  std::deque<absl::Duration> commit_waits_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> last_commit_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::internal
