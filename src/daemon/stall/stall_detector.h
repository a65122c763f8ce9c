// Names the ranks that hold a job up, from what each rank last reported
// doing (WorkerActivity, on its heartbeats; the heartbeat thread sends it, so
// a rank blocked inside its transport still reports).
//
// A stall: ranks of the global process set have waited in one collective
// past the warning time. Its culprits are the ranks that have not submitted
// it ("missing"); when every rank has, the two ends of the link that stalled
// ("link": of the waits for a peer's data the ranks report, the oldest: the
// waiting rank and the awaited one; while every such wait is younger than the
// warning time the transfers still move and nothing is named); when none
// says, every waiting rank ("unknown"). The list is never empty. Past the
// job's act time the stall is acted on once (the driver evicts the culprits,
// of a link its awaited end, or fails the job).
//
// A straggler: a rank whose compute time per step (its step less the time it
// waited in collectives) is well above the others', so they wait for it.
// Each rank's loss (the others' median wait per step less its own) is kept
// for status; with --evict-stragglers FACTOR, a rank above FACTOR times the
// others' median compute for a sustained window is handed back for eviction.
// What is judged of a straggler is kept by worker id, not rank: ranks are
// renumbered from one generation to the next, and a process's slowness must
// never be held against another that takes its number.
//
// Decides only: pure (time is an argument), owned by one JobDriver and used
// on its loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/stall/stall_settings.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// One member of the job's ready generation, as the detector sees it.
struct RankReport {
  int rank = 0;
  int64_t worker_id = 0;
  std::string host;
  int pid = 0;
  const v1::WorkerActivity* activity = nullptr;  // none reported (yet)
  absl::Time reported_at;                        // the daemon's clock
};

class StallDetector {
 public:
  // Is a rank a straggler, shown: its compute per step against the others'.
  static constexpr double kShownFactor = 1.25;
  // --evict-stragglers judges over at least this long (and ten median steps).
  static constexpr absl::Duration kStragglerWindow = absl::Seconds(10);

  StallDetector(StallSettings settings, bool elastic);

  const StallSettings& settings() const { return settings_; }

  // A new generation became ready at `at`: reports from before it, and any
  // stall or straggler judged in the one before, are forgotten.
  void NewGeneration(absl::Time at);

  struct Verdict {
    std::optional<v1::StallReport> named;            // a stall named now (once)
    std::optional<v1::StallReport> act;              // a stall to act on now (once)
    std::optional<v1::StallReport> cleared;          // the named stall is over
    std::vector<v1::StallCulprit> evict_stragglers;  // each once
  };
  // `ranks`: the ready generation's members.
  Verdict Check(absl::Time now, const std::vector<RankReport>& ranks);

  // The stall named and still lasting.
  const std::optional<v1::StallReport>& current() const { return current_; }

  struct Straggling {
    double lost_seconds_per_step = 0;
    bool straggler = false;
  };
  // By worker id, as of the last Check.
  const std::map<int64_t, Straggling>& straggling() const { return straggling_; }

  // How often Check is worth running: a stall is named at most this late.
  absl::Duration period() const;

 private:
  std::optional<v1::StallReport> FindStall(absl::Time now, const std::vector<RankReport>& ranks,
                                           bool* undecided) const;
  void JudgeStragglers(absl::Time now, const std::vector<RankReport>& ranks, Verdict& verdict);

  const StallSettings settings_;
  const bool elastic_;
  absl::Time generation_at_ = absl::InfinitePast();
  std::optional<v1::StallReport> current_;
  // By worker id (see the top).
  std::map<int64_t, Straggling> straggling_;
  // Since when each worker has been above the eviction factor.
  std::map<int64_t, absl::Time> slow_since_;
  std::set<int64_t> straggler_evicted_;
};

}  // namespace horovodd::daemon
