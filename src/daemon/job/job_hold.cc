// JobDriver: decisions held while the daemon's decision gate is shut (a
// leader that has gone a lease TTL without renewing its etcd lease: a
// standby may lead the same job by now, reattached to the same shims). The
// job then acts on no process and no membership; its workers train on, their
// heartbeats, key-value calls and rendezvous in the current generation are
// answered, and events are recorded. What would have been acted on waits
// here and is taken up when the gate reopens (the lease renewed: nobody else
// led); a closed gate (etcd says the lease is gone) keeps it all: the daemon
// steps down and leaves the workers to the new leader. Runs on the job's
// loop thread.
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {

bool JobDriver::Held() {
  return context_.gate != nullptr && context_.gate->state() != DecisionGate::State::kOpen;
}

bool JobDriver::HoldExit(int64_t worker_id, const ExitInfo& exit, absl::Time exited_at) {
  if (!Held()) return false;
  held_.exits.push_back({worker_id, exit, exited_at});
  recorder_.Record(v1::JobEvent::WARNING,
                   absl::StrCat(generations_.Describe(workers_.at(worker_id)), " ", exit.Describe(),
                                "; acted on when decisions resume"),
                   "worker_exit_held");
  return true;
}

bool JobDriver::HoldLoss(int64_t worker_id, const std::string& reason) {
  if (!Held()) return false;
  // The liveness monitor names it at every check: said once per hold.
  if (held_.lost.insert(worker_id).second) {
    recorder_.Record(v1::JobEvent::WARNING,
                     absl::StrCat(generations_.Describe(workers_.at(worker_id)), " lost: ", reason,
                                  "; not killed while decisions are held"),
                     "worker_lost_held");
  }
  return true;
}

bool JobDriver::HoldReplan(const std::string& cause, ReplanTrigger trigger) {
  if (!Held()) return false;
  // A failure's replan (peers abort) outweighs a membership change's.
  if (!held_.replan.has_value() || held_.replan->second == ReplanTrigger::kMembershipChange) {
    held_.replan.emplace(cause, trigger);
  }
  return true;
}

bool JobDriver::HoldFailure(const std::string& why) {
  if (!Held()) return false;
  if (!held_.failure.has_value()) held_.failure = why;
  return true;
}

void JobDriver::GateChanged() {
  if (lifecycle_.Terminal()) return;
  const DecisionGate::State state = context_.gate->state();
  if (state == DecisionGate::State::kHeld && !held_.said) {
    held_.said = true;
    recorder_.Record(v1::JobEvent::WARNING,
                     absl::StrCat("decisions held: ", context_.gate->why_held(),
                                  "; workers train on; a lost worker is acted on when etcd "
                                  "answers"),
                     "decisions_held");
    return;
  }
  // Closed: the daemon steps down and leaves everything held to the new leader.
  if (state != DecisionGate::State::kOpen) return;
  HeldDecisions held = std::move(held_);
  held_ = HeldDecisions();
  if (held.said) {
    recorder_.Record(
        v1::JobEvent::WARNING,
        absl::StrCat("decisions resume: the leader's etcd lease is renewed; acting on ",
                     held.exits.size(), " worker exit(s) and ", held.lost.size(),
                     " lost worker(s) held meanwhile"),
        "decisions_resumed");
  }
  // In the order they came; each may end the job or plan a generation. The
  // lost workers are named again by the liveness monitor at its next check,
  // if still silent.
  const int64_t generation = generations_.generation();
  for (const HeldExit& e : held.exits) {
    if (Held()) {
      held_.exits.push_back(e);
      continue;
    }
    OnWorkerExit(e.worker_id, e.exit, e.exited_at);
  }
  if (held.failure.has_value() && !lifecycle_.Terminal() && !HoldFailure(*held.failure)) {
    end_.Finish(v1::FAILED, *held.failure);
  }
  // A generation planned for the exits above also answers the held replan.
  if (held.replan.has_value() && !lifecycle_.Terminal() &&
      generations_.generation() == generation) {
    Replan(held.replan->first, held.replan->second);
  }
}

}  // namespace horovodd::daemon
