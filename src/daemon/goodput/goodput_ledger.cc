#include "daemon/goodput/goodput_ledger.h"

#include <algorithm>

#include "common/check.h"

namespace horovodd::daemon {
namespace {

using Part = GoodputLedger::Part;

int Index(Part part) { return static_cast<int>(part); }

// Which part wins where two would count the same moment: what a failure
// reveals says more than a wait.
int Priority(Part part) {
  switch (part) {
    case Part::kStall:
      return 1;
    case Part::kReplay:
      return 2;
    case Part::kDetection:
      return 3;
    default:
      return 0;
  }
}

}  // namespace

void GoodputLedger::Start(absl::Time now) {
  HVDD_CHECK(mode_ == Mode::kNotStarted) << "a job's goodput starts once";
  mode_ = Mode::kStarting;
  started_ = since_ = now;
}

void GoodputLedger::Restore(const v1::JobGoodput& earlier, absl::Time started, bool running,
                            absl::Time now) {
  HVDD_CHECK(mode_ == Mode::kNotStarted) << "only a new ledger is restored";
  started_ = started;
  parts_[Index(Part::kTraining)] = absl::Seconds(earlier.training_seconds());
  parts_[Index(Part::kStarting)] = absl::Seconds(earlier.starting_seconds());
  parts_[Index(Part::kWaiting)] = absl::Seconds(earlier.waiting_seconds());
  parts_[Index(Part::kDetection)] = absl::Seconds(earlier.detection_seconds());
  parts_[Index(Part::kReset)] = absl::Seconds(earlier.reset_seconds());
  parts_[Index(Part::kReplay)] = absl::Seconds(earlier.replay_seconds());
  parts_[Index(Part::kStall)] = absl::Seconds(earlier.stall_seconds());
  absl::Duration counted;
  for (absl::Duration d : parts_) counted += d;
  since_ = started_ + counted;
  mode_ = running ? Mode::kTraining : Mode::kResetting;
  // The time nobody counted goes to the mode the job was in.
  if (now > since_) Close(now);
}

GoodputLedger::Part GoodputLedger::CurrentPart() const {
  switch (mode_) {
    case Mode::kTraining:
      return Part::kTraining;
    case Mode::kResetting:
      return below_min_ ? Part::kWaiting : Part::kReset;
    default:
      return below_min_ ? Part::kWaiting : Part::kStarting;
  }
}

void GoodputLedger::Close(absl::Time now) {
  now = std::max(now, since_);
  if (mode_ == Mode::kTraining) {
    AddTraining(now, parts_);
    carved_.clear();
  } else {
    parts_[Index(CurrentPart())] += now - since_;
  }
  since_ = now;
}

void GoodputLedger::AddTraining(absl::Time now, std::array<absl::Duration, kParts>& parts) const {
  absl::Duration carved;
  for (const Segment& s : carved_) {
    const absl::Duration d = std::min(s.to, now) - std::max(s.from, since_);
    if (d <= absl::ZeroDuration()) continue;
    parts[Index(s.part)] += d;
    carved += d;
  }
  parts[Index(Part::kTraining)] += (now - since_) - carved;
}

void GoodputLedger::BeginTraining(absl::Time at) {
  Close(at);
  mode_ = Mode::kTraining;
  below_min_ = false;
  ready_at_.reset();
  failed_at_.reset();
  failure_replay_ = absl::ZeroDuration();
  seen_failure_.reset();
}

void GoodputLedger::Carve(Part part, absl::Time from, absl::Time to) {
  from = std::max(from, since_);
  if (to <= from) return;
  std::vector<absl::Time> points = {from, to};
  for (const Segment& s : carved_) {
    points.push_back(s.from);
    points.push_back(s.to);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  std::vector<Segment> merged;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    const absl::Time a = points[i];
    const absl::Time b = points[i + 1];
    std::optional<Part> label;
    for (const Segment& s : carved_) {
      if (s.from <= a && b <= s.to) label = s.part;
    }
    if (from <= a && b <= to && (!label.has_value() || Priority(part) > Priority(*label))) {
      label = part;
    }
    if (!label.has_value()) continue;
    if (!merged.empty() && merged.back().to == a && merged.back().part == *label) {
      merged.back().to = b;
    } else {
      merged.push_back({a, b, *label});
    }
  }
  carved_ = std::move(merged);
}

void GoodputLedger::BelowMinNp(absl::Time now) {
  if (below_min_ || (mode_ != Mode::kStarting && mode_ != Mode::kResetting)) return;
  Close(now);
  below_min_ = true;
}

void GoodputLedger::EnoughSlots(absl::Time now) {
  if (!below_min_) return;
  Close(now);
  below_min_ = false;
}

void GoodputLedger::GenerationReady(int64_t generation, absl::Time now) {
  ready_generation_ = generation;
  if (mode_ != Mode::kStarting && mode_ != Mode::kResetting) return;
  EnoughSlots(now);
  ready_at_ = now;
  // Workers that never commit give no other sign that they train again.
  if (!commits_seen_ || mode_ == Mode::kStarting) BeginTraining(now);
}

void GoodputLedger::Committed(int64_t generation, absl::Time at) {
  commits_seen_ = true;
  last_commit_at_ = std::max(last_commit_at_, at);
  if (mode_ != Mode::kResetting || !ready_at_.has_value() || generation != ready_generation_ ||
      at < *ready_at_) {
    return;
  }
  // The first commit of the new generation ends its first step: training
  // resumed one usual step before it.
  BeginTraining(std::max({*ready_at_, since_, at - step_}));
}

void GoodputLedger::Activity(int64_t generation, const v1::WorkerActivity& activity,
                             absl::Time now) {
  if (activity.step_seconds() > 0) step_ = absl::Seconds(activity.step_seconds());
  if (activity.last_commit() > 0 && activity.since_commit_seconds() >= 0) {
    Committed(generation, now - absl::Seconds(activity.since_commit_seconds()));
  }
  if (activity.has_waiting() && step_ > absl::ZeroDuration()) {
    const absl::Duration waited = absl::Seconds(activity.waiting().waited_seconds());
    if (waited > std::max(kMinStall, step_ * kStallSteps)) Stalled(now - waited + step_, now);
  }
}

void GoodputLedger::Stalled(absl::Time since, absl::Time now) {
  if (mode_ == Mode::kTraining) Carve(Part::kStall, since, now);
}

void GoodputLedger::FailureSeen(absl::Time at) {
  if (mode_ == Mode::kTraining) {
    seen_failure_ = std::min(seen_failure_.value_or(at), at);
  } else if (mode_ == Mode::kResetting) {
    FailureNoticed(at, at);  // may show the failure that stopped training was earlier
  }
}

void GoodputLedger::FailureNoticed(absl::Time happened, absl::Time now) {
  happened = std::min({happened, now, seen_failure_.value_or(happened)});
  if (mode_ == Mode::kTraining) {
    happened = std::max(happened, since_);
    // The workers go back to their last commit: what they did since is lost.
    Carve(Part::kReplay, std::min(std::max(last_commit_at_, since_), happened), happened);
    Carve(Part::kDetection, happened, now);
    absl::Duration replay;
    for (const Segment& s : carved_) {
      if (s.part == Part::kReplay) replay += s.to - s.from;
    }
    Close(now);
    mode_ = Mode::kResetting;
    failed_at_ = happened;
    failure_replay_ = replay;
  } else if (mode_ == Mode::kResetting && failed_at_.has_value() && happened < *failed_at_) {
    // Another notice of the failure that stopped training shows it happened
    // earlier than thought: that much of its replay was detection.
    const absl::Duration earlier = std::min(*failed_at_ - happened, failure_replay_);
    parts_[Index(Part::kReplay)] -= earlier;
    parts_[Index(Part::kDetection)] += earlier;
    failure_replay_ -= earlier;
    *failed_at_ -= earlier;
  }
}

void GoodputLedger::Interrupted(absl::Time now) {
  if (mode_ == Mode::kTraining) {
    Close(now);
    mode_ = Mode::kResetting;
  }
  ready_at_.reset();
}

void GoodputLedger::End(absl::Time now) {
  if (mode_ == Mode::kNotStarted || mode_ == Mode::kEnded) return;
  Close(now);
  mode_ = Mode::kEnded;
  ended_at_ = since_;
}

v1::JobGoodput GoodputLedger::Report(absl::Time now) const {
  v1::JobGoodput report;
  if (mode_ == Mode::kNotStarted) return report;
  std::array<absl::Duration, kParts> parts = parts_;
  now = mode_ == Mode::kEnded ? ended_at_ : std::max(now, since_);
  if (mode_ == Mode::kTraining) {
    AddTraining(now, parts);
  } else if (mode_ != Mode::kEnded) {
    parts[Index(CurrentPart())] += now - since_;
  }
  const auto seconds = [&parts](Part part) { return absl::ToDoubleSeconds(parts[Index(part)]); };
  const double wall = absl::ToDoubleSeconds(now - started_);
  report.set_wall_seconds(wall);
  report.set_training_seconds(seconds(Part::kTraining));
  report.set_starting_seconds(seconds(Part::kStarting));
  report.set_waiting_seconds(seconds(Part::kWaiting));
  report.set_detection_seconds(seconds(Part::kDetection));
  report.set_reset_seconds(seconds(Part::kReset));
  report.set_replay_seconds(seconds(Part::kReplay));
  report.set_stall_seconds(seconds(Part::kStall));
  if (wall > 0) report.set_goodput(report.training_seconds() / wall);
  return report;
}

}  // namespace horovodd::daemon
