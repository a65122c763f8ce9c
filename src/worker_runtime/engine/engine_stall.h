// Horovod's stall check: a rank whose requests wait past the check time for
// ranks that have not submitted them says which ranks are missing which
// tensors, again every check time; past the shutdown time (if set) the
// engine fails them with that reason, so the job fails instead of hanging.
//
// What a rank can know: after each negotiation round, the names some ranks
// have pending and others not (every rank learns the same); while a round's
// exchange waits, the peers whose part has not arrived yet (those ranks are
// in no round at all, so they are missing everything this rank has
// pending). The thread running the round reports both; the engine's stall
// thread calls Check. Owned by the engine; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace horovodd::internal {

struct StallOptions {
  bool enabled = true;
  absl::Duration check_time = absl::Seconds(60);
  absl::Duration shutdown_time = absl::ZeroDuration();  // zero: never

  // HOROVOD_STALL_CHECK_DISABLE (1 disables), HOROVOD_STALL_CHECK_TIME_SECONDS,
  // HOROVOD_STALL_SHUTDOWN_TIME_SECONDS, Horovod's names; no shutdown when
  // HOROVODD_STALL_SHUTDOWN_BY_DAEMON is set (the daemon that started the
  // worker acts on stalls: daemon/stall/stall_settings.h). INVALID_ARGUMENT
  // naming a variable that is not a non-negative number.
  static absl::StatusOr<StallOptions> FromEnvironment();
};

class StallInspector {
 public:
  explicit StallInspector(StallOptions options) : options_(options) {}

  const StallOptions& options() const { return options_; }

  // The round thread: a round's exchange starts with this rank's pending
  // names (`self` is this rank's number on the ring of `ranks`).
  void RoundStarted(const std::vector<std::string>& pending, int self, int ranks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The peer's part of the round arrived.
  void PeerArrived(int rank) ABSL_LOCKS_EXCLUDED(mu_);
  // The round was decided: `waiting` maps each name pending on some ranks
  // only to the ranks that do not have it.
  void RoundDecided(const std::map<std::string, std::vector<int>>& waiting)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The ring changed: nothing waits any more.
  void Reset() ABSL_LOCKS_EXCLUDED(mu_);

  struct Verdict {
    std::string warning;   // non-empty: log it
    std::string shutdown;  // non-empty: fail the requests with it
  };
  // What is stalled at `now`: a warning at most once per check time.
  Verdict Check(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const StallOptions options_;
  absl::Mutex mu_;
  // Names that wait for missing ranks, with since when and which ranks.
  struct Waiting {
    absl::Time since;
    std::vector<int> missing;
  };
  std::map<std::string, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  // When each name this rank has pending was first in a round.
  std::map<std::string, absl::Time> first_pending_ ABSL_GUARDED_BY(mu_);
  // The round whose exchange is in flight, if any.
  std::optional<absl::Time> round_since_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> round_pending_ ABSL_GUARDED_BY(mu_);
  // Which peers' parts of that round have not arrived, by rank: marked off
  // in place, so a round at 256 ranks neither allocates nor rebalances a
  // tree 255 times.
  std::vector<bool> round_missing_ ABSL_GUARDED_BY(mu_);
  absl::Time last_warning_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace horovodd::internal
