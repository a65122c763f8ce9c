// Where one job's wall time goes (v1::JobGoodput): training on work that was
// kept, starting, waiting for --min-np slots, detecting a failure, resetting,
// replaying the work a failure lost, and stalls. The job's driver feeds it
// what happens, each with the moment it happened; the ledger keeps no clock
// of its own, so tests drive it with a simulated one. Every moment from the
// start to the end (or now) is counted in exactly one part, so the parts add
// up to the wall time.
//
// The job is always in one mode: starting (until its first generation trains),
// training (a generation runs), resetting (a failure or a membership change
// stopped training, until the new generation trains again), or ended. While
// starting or resetting with too few slots, the time is waiting. Training
// time is later split when something reveals what it was: a failure turns the
// work since the last commit into replay and the time from its earliest sign
// to the daemon's acting on it into detection; a stall turns the time ranks
// waited into stall.
// Training resumes after a reset at the new generation's first commit less one
// usual step (the step itself was training), or at once for workers that
// never commit.
//
// Owner: the job's driver (daemon/job/job_driver.h), on its loop thread.
// Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class GoodputLedger {
 public:
  enum class Part { kTraining, kStarting, kWaiting, kDetection, kReset, kReplay, kStall };
  static constexpr int kParts = 7;
  // A wait in a collective is a stall once it is this many usual steps long,
  // and at least kMinStall; the part beyond one usual step counts. Without a
  // usual step (fewer than two commits: every fixed-size job) no wait is
  // judged here: a long collective is not a stall; the StallDetector's named
  // stalls come through Stalled instead.
  static constexpr double kStallSteps = 5;
  static constexpr absl::Duration kMinStall = absl::Seconds(1);

  // The job starts at `now`.
  void Start(absl::Time now);
  // Instead of Start, for a job taken back after a daemon restart at `now`:
  // the parts an earlier run counted from `started` (`earlier`); the time
  // since then, when nobody was counting, goes to training when a
  // generation was running (`running`), else to resetting, and the job goes
  // on in that mode.
  void Restore(const v1::JobGoodput& earlier, absl::Time started, bool running, absl::Time now);

  // The job has too few slots for its next generation (-np at the start,
  // --min-np after), or has enough again.
  void BelowMinNp(absl::Time now);
  void EnoughSlots(absl::Time now);
  // Generation `generation` formed at `now`.
  void GenerationReady(int64_t generation, absl::Time now);
  // A worker of `generation` committed at `at`.
  void Committed(int64_t generation, absl::Time at);
  // What a worker of `generation` reported at `now` (its heartbeat): its
  // last commit, its usual step and what it waits in. A wait past
  // kStallSteps usual steps goes to Stalled.
  void Activity(int64_t generation, const v1::WorkerActivity& activity, absl::Time now);
  // Ranks have waited in a collective since `since`, far longer than usual,
  // and still did at `now`. Called again as the stall goes on (by Activity,
  // and by the driver while its StallDetector has a stall named).
  void Stalled(absl::Time since, absl::Time now);
  // A worker reported at `at` that a collective of the running generation
  // failed: whatever failure the daemon notices next happened no later.
  void FailureSeen(absl::Time at);
  // A failure that happened at `happened` (or at the earliest FailureSeen
  // before it) was noticed at `now`; training (if it ran) stopped and the
  // job resets.
  void FailureNoticed(absl::Time happened, absl::Time now);
  // The running generation's workers were told of a new one at `now` (no
  // failure: they stop at their next commit, losing nothing).
  void Interrupted(absl::Time now);
  // The job ended at `now`; nothing counts after.
  void End(absl::Time now);

  // The parts up to `now` (the end, once ended).
  v1::JobGoodput Report(absl::Time now) const;

 private:
  enum class Mode { kNotStarted, kStarting, kTraining, kResetting, kEnded };
  // A stretch of the running training that is counted as another part.
  struct Segment {
    absl::Time from;
    absl::Time to;
    Part part;
  };

  // What [since_, now) counts as, outside training.
  Part CurrentPart() const;
  // Closes [since_, now): counted, and since_ = now.
  void Close(absl::Time now);
  void BeginTraining(absl::Time at);
  // Counts [from, to) of the running training as `part`, over what was
  // counted as a part of lower priority (stall < replay < detection).
  void Carve(Part part, absl::Time from, absl::Time to);
  // Adds the running training's split up to `now` to `parts`.
  void AddTraining(absl::Time now, std::array<absl::Duration, kParts>& parts) const;

  Mode mode_ = Mode::kNotStarted;
  absl::Time started_;
  absl::Time since_;  // when the current mode (or waiting) began
  bool below_min_ = false;
  std::array<absl::Duration, kParts> parts_{};  // counted up to since_
  std::vector<Segment> carved_;                 // of the running training, in order
  // The newest generation formed, and when, while starting or resetting.
  int64_t ready_generation_ = 0;
  std::optional<absl::Time> ready_at_;
  bool commits_seen_ = false;
  absl::Time last_commit_at_ = absl::InfinitePast();
  absl::Duration step_ = absl::ZeroDuration();  // a usual step, as workers report it
  // The failure that stopped training last, while its reset runs: when it
  // happened, and the replay it was charged (moved to detection if an
  // earlier moment of the same failure comes to light).
  std::optional<absl::Time> failed_at_;
  absl::Duration failure_replay_ = absl::ZeroDuration();
  // The earliest FailureSeen of the running training.
  std::optional<absl::Time> seen_failure_;
  absl::Time ended_at_;
};

}  // namespace horovodd::daemon
