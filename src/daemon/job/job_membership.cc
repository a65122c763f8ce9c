// JobDriver: membership. Planning generations, rendezvous completion, worker
// exits, failures and losses. Runs on the job's loop thread; the books are
// the parts' (worker_table.h, generation_planner.h, liveness_monitor.h,
// reset_history.h, job_hosts.h), the job's state and phase the lifecycle's
// (job_lifecycle.h), its end JobEnd's (job_end.h), what comes of a launch
// WorkerLaunches' (worker_launches.h).
#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {
namespace {

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), " ms"); }

}  // namespace

void JobDriver::Replan(const std::string& cause, ReplanTrigger trigger) {
  if (!lifecycle_.MayPlan() || HoldReplan(cause, trigger)) return;
  const bool failure = trigger != ReplanTrigger::kMembershipChange;
  const absl::Time now = clock_.Now();
  Plan plan = generations_.Next(workers_, hosts_.manager(), now);
  // Horovod starts once -np slots are there and after a reset goes on with
  // --min-np; either way with as many workers as the usable slots allow.
  const int needed = generations_.generation() == 0 ? spec_.num_proc() : spec_.min_np();
  if (plan.size() < needed) {
    // Every worker failed or is gone and the plan has nothing to run on. A
    // worker still running (leaving, or not yet exited) may still fail or
    // finish: its exit decides.
    if (!first_failure_.empty() && plan.survivors.empty() && plan.new_hosts.empty() &&
        workers_.AllGone()) {
      end_.Finish(v1::FAILED,
                  absl::StrCat(kNonZeroExitMessage, first_failure_, " (no usable host is left: ",
                               discovery::TotalSlots(hosts_.manager().UsableHosts(now)),
                               " usable slot(s))"));
      return;
    }
    // Also when nothing changed: a job whose hosts all refuse workers must
    // still end at --elastic-timeout.
    hosts_.ArmBelowMinTimer(plan.size(), needed);
    goodput_.BelowMinNp(now);
    return;
  }
  if (trigger != ReplanTrigger::kBrokenRing && generations_.Unchanged(plan)) {
    UpdateSpares(plan);
    return;
  }
  hosts_.CancelBelowMinTimer();
  goodput_.EnoughSlots(now);
  if (generations_.generation() > 0 && generations_.rendezvous_open()) {
    // The generation planned last never formed: this plan is part of the
    // reset (or the start) that planned it.
    if (generations_.ready_generation() > 0) resets_.Replanned(generations_.generation() + 1);
  } else if (generations_.generation() > 0) {
    if (spec_.reset_limit() > 0 && resets_.resets() >= spec_.reset_limit()) {
      end_.Finish(v1::FAILED,
                  absl::StrCat("Horovod was shutdown because number of resets during elastic job "
                               "exceeded limit: ",
                               spec_.reset_limit(), " (--reset-limit; last cause: ", cause, ")"));
      return;
    }
    lifecycle_.MoveTo(v1::RESETTING, generations_.generation());
    resets_.Began(generations_.generation() + 1, cause, now);
  }
  if (plan.kept_on_blacklisted) {
    recorder_.Record(
        v1::JobEvent::WARNING,
        "the workers on blacklisted hosts stay: removing them would leave no surviving "
        "worker (Horovod would stop here: \"No hosts from previous set remaining, unable to "
        "broadcast state\")",
        "blacklisted_kept");
  }
  generations_.Begin(plan, now);
  starter_.PlanRanks(plan);
  for (int64_t id : plan.removed) {
    Worker& w = workers_.at(id);
    if (w.state != v1::WORKER_REMOVED) {  // else held since an earlier plan: said already
      recorder_.Record(v1::JobEvent::INFO,
                       absl::StrCat(generations_.Describe(w), " leaves: ",
                                    WhyLeaving(plan, w, hosts_.manager(), clock_.Now())));
      w.state = v1::WORKER_REMOVED;
    }
    // A held worker hears it once the plan forms (TryCompleteRendezvous).
    if (w.waiting && !generations_.Holds(id)) w.Answer(generations_.RemovedAnswer());
  }
  for (const Member& m : plan.survivors) {
    Worker& w = workers_.at(m.worker_id);
    if (w.state == v1::WORKER_REMOVED) w.state = v1::WORKER_RUNNING;  // held, and kept after all
  }
  for (size_t i = 0; i < plan.promoted.size(); ++i) {
    Worker& w = workers_.at(plan.promoted[i].worker_id);
    w.state = v1::WORKER_STARTING;  // a member from now on, joining as a new worker does
    recorder_.Record(
        v1::JobEvent::INFO,
        absl::StrCat("spare ", w.id, " on ", w.host, " took rank ", plan.survivors.size() + i,
                     " of generation ", generations_.generation()),
        "spare_swapped");
  }
  recorder_.Record(
      v1::JobEvent::INFO,
      absl::StrCat("generation ", generations_.generation(), " planned: size ", plan.size(), " (",
                   plan.survivors.size(), " kept, ",
                   plan.promoted.empty() ? "" : absl::StrCat(plan.promoted.size(), " spare, "),
                   plan.new_hosts.size(), " new, ", plan.removed.size(),
                   " leaving); cause: ", cause));
  UpdateSpares(plan);
  // Growing a running job: its members train on while the new workers start
  // (a process, maybe an interpreter importing a framework: seconds), and
  // hear of the new generation once every new member waits for it.
  const bool grow_only = generations_.ready_generation() > 0 && !failure && plan.removed.empty() &&
                         !plan.new_hosts.empty();
  // Until the members are told, they train on the ready generation's ring,
  // whose lazy connections still go through that generation's keys.
  kv_.AdvanceTo(grow_only ? generations_.ready_generation() : generations_.generation());
  if (!grow_only) {
    generations_.ForgetJoiners();
    workers_.SendToAttached(generations_.Announcement(/*abort_collectives=*/failure));
    goodput_.Interrupted(now);
  }
  const size_t first_new = generations_.members().size();
  for (const auto& host : plan.new_hosts) {
    launches_.Launch(host, static_cast<int>(generations_.members().size()));
    if (lifecycle_.Terminal()) return;
  }
  if (grow_only) {
    generations_.ExpectJoiners(first_new);
    NotifyOnceJoinersWait();  // at once when none could be started
  }
  TryCompleteRendezvous();
}

void JobDriver::NotifyOnceJoinersWait() {
  if (lifecycle_.Terminal()) return;
  // The elastic timeout for joining counts from now for the members told now.
  if (!generations_.JoinersWait(workers_, clock_.Now())) return;
  recorder_.Record(v1::JobEvent::INFO,
                   absl::StrCat("the new workers of generation ", generations_.generation(),
                                " are ready; the others join it now"));
  kv_.AdvanceTo(generations_.generation());
  workers_.SendToAttached(generations_.Announcement(/*abort_collectives=*/false));
  goodput_.Interrupted(clock_.Now());
}

void JobDriver::TryCompleteRendezvous() {
  if (lifecycle_.Terminal() || !generations_.rendezvous_open()) return;
  if (static_cast<int>(generations_.members().size()) < spec_.min_np()) return;
  if (!generations_.AllWaiting(workers_)) return;
  generations_.MarkReady(workers_);
  const std::vector<int64_t>& members = generations_.members();
  {
    ChannelBatch batch;  // the answers go out together: one write per host stream
    for (int64_t id : generations_.TakeHeld()) {
      Worker& w = workers_.at(id);
      if (w.waiting) w.Answer(generations_.RemovedAnswer());
    }
    for (size_t rank = 0; rank < members.size(); ++rank) {
      Worker& w = workers_.at(members[rank]);
      w.Answer(generations_.ReadyAnswer(w, static_cast<int>(rank)));
    }
  }
  lifecycle_.MoveTo(v1::RUNNING, generations_.generation());
  const absl::Time now = clock_.Now();
  goodput_.GenerationReady(generations_.generation(), now);
  stall_.NewGeneration(now);
  std::string took;
  v1::JobEvent e;
  if (std::optional<absl::Duration> reset = resets_.Ready(generations_.generation(), now)) {
    took = absl::StrCat(" (reset took ", Millis(*reset), ")");
    e.set_reset_seconds(absl::ToDoubleSeconds(*reset));
  }
  std::vector<std::string> hosts;
  hosts.reserve(members.size());
  for (int64_t id : members) hosts.push_back(workers_.at(id).host);
  e.set_kind(v1::JobEvent::MEMBERSHIP);
  e.set_generation(generations_.generation());
  e.set_size(static_cast<int>(members.size()));
  e.set_message(absl::StrCat("generation ", generations_.generation(), " ready: size ",
                             members.size(), " on ", absl::StrJoin(hosts, ","), took));
  events_.Append(std::move(e));
  // The spares that waited for the generation to form start now.
  if (spec_.hot_spares() > 0 && spec_.elastic()) {
    loop_.Post([this, g = generations_.generation()] {
      Replan(absl::StrCat("hot spares after generation ", g, " formed"),
             ReplanTrigger::kMembershipChange);
    });
  }
}

void JobDriver::UpdateSpares(const Plan& plan) {
  for (int64_t id : plan.spares_removed) {
    Worker& w = workers_.at(id);
    if (!IsSpare(w)) continue;
    recorder_.Record(v1::JobEvent::INFO,
                     absl::StrCat("spare ", id, " on ", w.host, " leaves: ",
                                  WhyLeaving(plan, w, hosts_.manager(), clock_.Now())));
    w.state = v1::WORKER_REMOVED;
    if (w.waiting) w.Answer(generations_.RemovedAnswer());
  }
  if (generations_.rendezvous_open() || generations_.ready_generation() == 0) return;
  if (!said_spares_short_ && plan.spares < spec_.hot_spares()) {
    said_spares_short_ = true;
    recorder_.Record(v1::JobEvent::WARNING,
                     absl::StrCat("--hot-spares ", spec_.hot_spares(),
                                  ": the usable slots beyond "
                                  "the job's hold ",
                                  plan.spares,
                                  " spare(s) now; more start when "
                                  "slots are added"),
                     "spares_short");
  }
  for (const std::string& host : plan.spare_hosts) {
    launches_.LaunchSpare(host, static_cast<int>(generations_.members().size()));
    if (lifecycle_.Terminal()) return;
  }
}

void JobDriver::OnSpareExit(Worker& w, const ExitInfo& exit) {
  const std::string what = w.lost_reason.empty()
                               ? exit.Describe()
                               : absl::StrCat(w.lost_reason, " (", exit.Describe(), ")");
  w.state = v1::WORKER_FAILED;
  if (lifecycle_.Finishing()) return;
  const std::string blacklisted = hosts_.Blacklist(w.host, what, clock_.Now());
  recorder_.Record(v1::JobEvent::WARNING,
                   absl::StrCat("spare ", w.id, " on ", w.host, " ", what, "; ", blacklisted),
                   "spare_failed");
  Replan(absl::StrCat("spare ", w.id, " failed"), ReplanTrigger::kMembershipChange);
}

void JobDriver::DismissSpares() {
  for (auto& [id, w] : workers_) {
    if (!IsSpare(w)) continue;
    w.state = v1::WORKER_REMOVED;
    if (w.waiting) {
      w.Answer(generations_.RemovedAnswer());
    } else if (w.handle != 0) {
      context_.launcher->Signal(w.handle, SIGTERM).IgnoreError();
    }
  }
}

void JobDriver::OnWorkerExit(int64_t id, const ExitInfo& exit, absl::Time exited_at) {
  Worker* w = workers_.Find(id);
  if (w == nullptr) return;
  WorkerTable::Exited(*w, exit);
  w->exited_at = exited_at;
  // Its process is gone (recorded above); what that means waits (job_hold.cc).
  if (!lifecycle_.Terminal() && HoldExit(id, exit, exited_at)) return;
  if (lifecycle_.Terminal()) {
    if (w->state == v1::WORKER_RUNNING || w->state == v1::WORKER_STARTING) {
      w->state = exit.success() ? v1::WORKER_SUCCEEDED : v1::WORKER_FAILED;
    } else if (IsSpare(*w)) {
      w->state = v1::WORKER_REMOVED;
    }
    end_.MaybeCloseLog();
    return;
  }
  if (IsSpare(*w)) {
    OnSpareExit(*w, exit);
    return;
  }
  if (w->state == v1::WORKER_REMOVED) {
    recorder_.Record(v1::JobEvent::INFO, absl::StrCat(generations_.Describe(*w), " left the job (",
                                                      exit.Describe(), ")"));
    // The job may have been waiting for it to go before it can end, or to
    // see that nothing is left to run on (Replan).
    if (lifecycle_.Finishing()) {
      end_.MaybeFinishSucceeded(JobEnd::Finishers::kReadyMembers);
    } else if (!first_failure_.empty()) {
      Replan(absl::StrCat(generations_.Describe(*w), " left"), ReplanTrigger::kMembershipChange);
    }
    return;
  }
  const bool in_ready = generations_.ready_generation() > 0 &&
                        w->joined_generation == generations_.ready_generation() &&
                        generations_.RankOf(id) >= 0;
  // A command that never uses the runtime (horovodrun -np 2 hostname) has no
  // ready generation: its planned members are the job.
  const bool plain = generations_.ready_generation() == 0 && generations_.IsMember(id);
  if (exit.success() && w->lost_reason.empty() && (in_ready || plain)) {
    w->state = v1::WORKER_SUCCEEDED;
    if (lifecycle_.StartFinishing()) {
      recorder_.Record(v1::JobEvent::INFO,
                       absl::StrCat(generations_.Describe(*w), " finished; the job is ending"));
      // Workers started for a generation that never formed are not needed.
      for (int64_t m : generations_.members()) {
        Worker& other = workers_.at(m);
        if (!plain && other.handle != 0 && generations_.RankOf(m) < 0) {
          other.state = v1::WORKER_REMOVED;
          context_.launcher->Signal(other.handle, SIGTERM).IgnoreError();
        }
      }
      // Nor are the workers held back from leaving (generation_planner.h), nor spares.
      for (int64_t held : generations_.TakeHeld()) {
        Worker& other = workers_.at(held);
        if (other.waiting) other.Answer(generations_.RemovedAnswer());
      }
      DismissSpares();
    }
    end_.MaybeFinishSucceeded(plain ? JobEnd::Finishers::kPlannedMembers
                                    : JobEnd::Finishers::kReadyMembers);
    return;
  }
  std::string what = exit.Describe();
  if (exit.success() && !in_ready) what = "exited with status 0 before joining the job";
  if (!w->lost_reason.empty()) what = absl::StrCat(w->lost_reason, " (", exit.Describe(), ")");
  OnWorkerFailed(*w, what);
}

void JobDriver::OnWorkerFailed(Worker& w, const std::string& what) {
  w.state = v1::WORKER_FAILED;
  const std::string description = absl::StrCat(generations_.Describe(w), " ", what);
  if (first_failure_.empty()) first_failure_ = description;
  if (!spec_.elastic()) {
    end_.Finish(v1::FAILED, absl::StrCat(kNonZeroExitMessage, description));
    return;
  }
  if (lifecycle_.Finishing()) {
    end_.Finish(v1::FAILED, absl::StrCat(description, ", after other workers had finished"));
    return;
  }
  // Horovod's rule: a failing worker blacklists its host; the host's other
  // workers leave at the reset this starts (Replan, PlanGeneration).
  const absl::Time now = clock_.Now();
  const std::string blacklisted = hosts_.Blacklist(w.host, what, now);
  recorder_.Record(v1::JobEvent::WARNING, absl::StrCat(description, "; ", blacklisted),
                   w.lost_reason.empty() ? "worker_failed" : "worker_lost");
  resets_.Detected(now);
  // It failed when its process ended, as near as the daemon can tell.
  goodput_.FailureNoticed(w.exited_at == absl::InfinitePast() ? now : w.exited_at, now);
  Replan(description, ReplanTrigger::kWorkerFailure);
}

void JobDriver::OnWorkerLost(int64_t worker_id, const std::string& reason, absl::Time last_seen) {
  Worker& w = workers_.at(worker_id);
  if (!w.lost_reason.empty() || w.handle == 0 || HoldLoss(worker_id, reason)) return;
  w.lost_reason = reason;
  recorder_.Record(v1::JobEvent::WARNING,
                   absl::StrCat(generations_.Describe(w), " lost: ", reason, "; killing it"));
  if (!IsSpare(w)) {  // a spare's loss costs the job no reset
    resets_.Detected(clock_.Now());
    goodput_.FailureNoticed(last_seen, clock_.Now());  // it failed after it was last heard
  }
  // Its sockets close when it dies, so peers blocked on it fail at once;
  // its exit (OnWorkerExit) then counts as a failure.
  context_.launcher->Signal(w.handle, SIGKILL).IgnoreError();
}

}  // namespace horovodd::daemon
