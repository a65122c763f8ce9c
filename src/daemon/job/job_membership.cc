// JobDriver: membership. Discovery, planning generations, worker exits,
// liveness, rendezvous completion (what comes of a launch: job_launch.cc).
// Runs on the job's loop thread; the books are the parts' (worker_table.h,
// generation_planner.h, liveness_monitor.h, reset_history.h), the job's
// state and phase the lifecycle's (job_lifecycle.h).
#include <algorithm>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/job/discovery_poller.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {
namespace {

std::string Millis(absl::Duration d) { return absl::StrCat(absl::ToInt64Milliseconds(d), " ms"); }

}  // namespace

void JobDriver::StartDiscovery() {
  poller_ = DiscoveryPoller::ForJob(spec_, [this](absl::StatusOr<discovery::HostSet> hosts) {
    loop_.Post([this, hosts = std::move(hosts)] { OnHosts(hosts); });
  });
  if (poller_ == nullptr) OnHosts(ListedHosts(spec_));
}

void JobDriver::OnHosts(absl::StatusOr<discovery::HostSet> hosts) {
  if (lifecycle_.Terminal()) return;
  if (!hosts.ok()) {
    std::string message(hosts.status().message());
    if (message != last_discovery_error_) {
      recorder_.Record(
          v1::JobEvent::WARNING,
          absl::StrCat("host discovery failed, keeping the last good hosts: ", message),
          "discovery_failed");
      last_discovery_error_ = message;
    }
    return;
  }
  if (!last_discovery_error_.empty()) {
    recorder_.Record(v1::JobEvent::INFO, "host discovery works again");
    last_discovery_error_.clear();
  }
  discovery::HostDiff diff = hosts_.UpdateDiscovered(*hosts);
  const bool first = lifecycle_.HostsFound();
  if (!first && diff.empty()) {
    // Every discovery run may grow the job to the usable slots (a launch that
    // failed, say); a plan that changes nothing does nothing.
    Replan("discovery", ReplanTrigger::kMembershipChange);
    return;
  }
  std::vector<std::string> parts;
  for (const auto& h : *hosts) parts.push_back(absl::StrCat(h.host, ":", h.slots));
  std::string summary =
      absl::StrCat("hosts ", parts.empty() ? "(none)" : absl::StrJoin(parts, ","));
  recorder_.Record(v1::JobEvent::INFO, first ? absl::StrCat("discovered ", summary)
                                             : absl::StrCat("hosts changed, now ", summary));
  if (!first) resets_.Detected(clock_.Now());
  Replan(first ? "job start" : "hosts changed", ReplanTrigger::kMembershipChange);
}

void JobDriver::Replan(const std::string& cause, ReplanTrigger trigger) {
  if (!lifecycle_.MayPlan()) return;
  const bool failure = trigger != ReplanTrigger::kMembershipChange;
  const absl::Time now = clock_.Now();
  Plan plan = generations_.Next(workers_, hosts_, now);
  // Horovod starts once -np slots are there and after a reset goes on with
  // --min-np; either way with as many workers as the usable slots allow.
  const int needed = generations_.generation() == 0 ? spec_.num_proc() : spec_.min_np();
  if (plan.size() < needed) {
    // Every worker failed or is gone and the plan has nothing to run on. A
    // worker still running (leaving, or not yet exited) may still fail or
    // finish: its exit decides.
    if (!first_failure_.empty() && plan.survivors.empty() && plan.new_hosts.empty() &&
        workers_.AllGone()) {
      Finish(v1::FAILED,
             absl::StrCat(kNonZeroExitMessage, first_failure_, " (no usable host is left: ",
                          discovery::TotalSlots(hosts_.UsableHosts(now)), " usable slot(s))"));
      return;
    }
    // Also when nothing changed: a job whose hosts all refuse workers must
    // still end at --elastic-timeout.
    ArmBelowMinTimer(plan.size(), needed);
    return;
  }
  if (trigger != ReplanTrigger::kBrokenRing && plan.unchanged(generations_.members().size())) {
    return;
  }
  if (below_min_timer_ != 0) {
    loop_.Cancel(below_min_timer_);
    below_min_timer_ = 0;
  }
  if (generations_.generation() > 0 && generations_.rendezvous_open()) {
    // The generation planned last never formed: this plan is part of the
    // reset (or the start) that planned it.
    if (generations_.ready_generation() > 0) resets_.Replanned(generations_.generation() + 1);
  } else if (generations_.generation() > 0) {
    if (spec_.reset_limit() > 0 && resets_.resets() >= spec_.reset_limit()) {
      Finish(v1::FAILED,
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
    recorder_.Record(v1::JobEvent::INFO, absl::StrCat(generations_.Describe(w), " leaves: ",
                                                      WhyLeaving(plan, w, hosts_, clock_.Now())));
    w.state = v1::WORKER_REMOVED;
    if (w.waiting) w.Answer(generations_.RemovedAnswer());
  }
  recorder_.Record(
      v1::JobEvent::INFO,
      absl::StrCat("generation ", generations_.generation(), " planned: size ", plan.size(), " (",
                   plan.survivors.size(), " kept, ", plan.new_hosts.size(), " new, ",
                   plan.removed.size(), " leaving); cause: ", cause));
  kv_.AdvanceTo(generations_.generation());
  // Growing a running job: its members train on while the new workers start
  // (a process, maybe an interpreter importing a framework: seconds), and
  // hear of the new generation once every new member waits for it.
  const bool grow_only = generations_.ready_generation() > 0 && !failure && plan.removed.empty() &&
                         !plan.new_hosts.empty();
  if (!grow_only) {
    generations_.ForgetJoiners();
    workers_.SendToAttached(generations_.Announcement(/*abort_collectives=*/failure));
  }
  const size_t first_new = generations_.members().size();
  for (const auto& host : plan.new_hosts) {
    LaunchWorker(host, static_cast<int>(generations_.members().size()));
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
  workers_.SendToAttached(generations_.Announcement(/*abort_collectives=*/false));
}

void JobDriver::ArmBelowMinTimer(int available, int needed) {
  if (below_min_timer_ != 0) return;
  const char* flag = needed == spec_.min_np() ? "--min-np" : "-np";
  // Before the first hosts nothing was planned: nothing to warn about.
  if (lifecycle_.MayPlan()) {
    recorder_.Record(v1::JobEvent::WARNING,
                     absl::StrCat("only ", available, " worker(s) possible, below ", flag, " ",
                                  needed, "; waiting up to --elastic-timeout ",
                                  spec_.elastic_timeout_seconds(), "s for more slots"));
  }
  below_min_timer_ =
      loop_.PostAfter(absl::Seconds(spec_.elastic_timeout_seconds()), [this, flag, needed] {
        below_min_timer_ = 0;
        int usable = discovery::TotalSlots(hosts_.UsableHosts(clock_.Now()));
        std::string why =
            absl::StrCat("could not reach ", flag, " ", needed, " within --elastic-timeout ",
                         spec_.elastic_timeout_seconds(), "s (", usable, " usable slot(s)");
        if (!last_discovery_error_.empty()) {
          absl::StrAppend(&why, "; discovery: ", last_discovery_error_);
        }
        Finish(v1::FAILED, why + ")");
      });
}

void JobDriver::TryCompleteRendezvous() {
  if (lifecycle_.Terminal() || !generations_.rendezvous_open()) return;
  if (static_cast<int>(generations_.members().size()) < spec_.min_np()) return;
  if (!generations_.AllWaiting(workers_)) return;
  generations_.MarkReady(workers_);
  const std::vector<int64_t>& members = generations_.members();
  for (size_t rank = 0; rank < members.size(); ++rank) {
    Worker& w = workers_.at(members[rank]);
    w.Answer(generations_.ReadyAnswer(w, static_cast<int>(rank)));
  }
  lifecycle_.MoveTo(v1::RUNNING, generations_.generation());
  const absl::Time now = clock_.Now();
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
}

void JobDriver::OnWorkerExit(int64_t id, const ExitInfo& exit) {
  Worker* w = workers_.Find(id);
  if (w == nullptr) return;
  WorkerTable::Exited(*w, exit);
  if (lifecycle_.Terminal()) {
    if (w->state == v1::WORKER_RUNNING || w->state == v1::WORKER_STARTING) {
      w->state = exit.success() ? v1::WORKER_SUCCEEDED : v1::WORKER_FAILED;
    }
    MaybeCloseLog();
    return;
  }
  if (w->state == v1::WORKER_REMOVED) {
    recorder_.Record(v1::JobEvent::INFO, absl::StrCat(generations_.Describe(*w), " left the job (",
                                                      exit.Describe(), ")"));
    // The job may have been waiting for it to go before it can end, or to
    // see that nothing is left to run on (Replan).
    if (lifecycle_.Finishing()) {
      MaybeFinishSucceeded(Finishers::kReadyMembers);
    } else if (!first_failure_.empty()) {
      Replan(absl::StrCat(generations_.Describe(*w), " left"), ReplanTrigger::kMembershipChange);
    }
    return;
  }
  const std::vector<int64_t>& ready_members = generations_.ready_members();
  const bool in_ready =
      generations_.ready_generation() > 0 &&
      w->joined_generation == generations_.ready_generation() &&
      std::find(ready_members.begin(), ready_members.end(), id) != ready_members.end();
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
        if (!plain && other.handle != 0 &&
            std::find(ready_members.begin(), ready_members.end(), m) == ready_members.end()) {
          other.state = v1::WORKER_REMOVED;
          context_.launcher->Signal(other.handle, SIGTERM).IgnoreError();
        }
      }
    }
    MaybeFinishSucceeded(plain ? Finishers::kPlannedMembers : Finishers::kReadyMembers);
    return;
  }
  std::string what = exit.Describe();
  if (exit.success() && !in_ready) what = "exited with status 0 before joining the job";
  if (!w->lost_reason.empty()) what = absl::StrCat(w->lost_reason, " (", exit.Describe(), ")");
  OnWorkerFailed(*w, what);
}

void JobDriver::MaybeFinishSucceeded(Finishers whose) {
  // A member that failed before anyone finished was written off by the reset
  // that followed (a failure after that ends the job in OnWorkerFailed), and
  // one that a shrink removed is no longer needed: once they have exited, the
  // job succeeds with the members that finished.
  const bool plain = whose == Finishers::kPlannedMembers;
  const auto& finishers = plain ? generations_.members() : generations_.ready_members();
  int finished = 0;
  for (int64_t m : finishers) {
    const Worker& w = workers_.at(m);
    if (w.state == v1::WORKER_SUCCEEDED) {
      ++finished;
    } else if (!((w.state == v1::WORKER_FAILED || w.state == v1::WORKER_REMOVED) && w.gone())) {
      return;
    }
  }
  std::string outcome = absl::StrCat(
      finished == static_cast<int>(finishers.size()) ? "all " : "", finished, " workers",
      plain ? "" : absl::StrCat(" of generation ", generations_.ready_generation()), " finished");
  if (finished != static_cast<int>(finishers.size())) {
    absl::StrAppend(&outcome, " (", finishers.size() - finished, " had left or failed before)");
  }
  Finish(v1::SUCCEEDED, outcome);
}

void JobDriver::OnWorkerFailed(Worker& w, const std::string& what) {
  w.state = v1::WORKER_FAILED;
  const std::string description = absl::StrCat(generations_.Describe(w), " ", what);
  if (first_failure_.empty()) first_failure_ = description;
  if (!spec_.elastic()) {
    Finish(v1::FAILED, absl::StrCat(kNonZeroExitMessage, description));
    return;
  }
  if (lifecycle_.Finishing()) {
    Finish(v1::FAILED, absl::StrCat(description, ", after other workers had finished"));
    return;
  }
  // Horovod's rule: a failing worker blacklists its host; the host's other
  // workers leave at the reset this starts (Replan, PlanGeneration).
  const absl::Time now = clock_.Now();
  const absl::Duration cooldown = hosts_.ReportFailure(w.host, what, now);
  int times = 0;
  for (const auto& h : hosts_.Hosts(now)) {
    if (h.host == w.host) times = h.cooldowns;
  }
  const std::string blacklisted =
      cooldown == absl::InfiniteDuration()
          ? absl::StrCat("host ", w.host, " is blacklisted for the rest of the job")
          : absl::StrCat("host ", w.host, " is blacklisted for ", Millis(cooldown), " (cooldown ",
                         times, ")");
  recorder_.Record(v1::JobEvent::WARNING, absl::StrCat(description, "; ", blacklisted),
                   w.lost_reason.empty() ? "worker_failed" : "worker_lost");
  ScheduleCooldownWakeup();
  resets_.Detected(now);
  Replan(description, ReplanTrigger::kWorkerFailure);
}

void JobDriver::OnWorkerLost(int64_t worker_id, const std::string& reason) {
  Worker& w = workers_.at(worker_id);
  if (!w.lost_reason.empty() || w.handle == 0) return;
  w.lost_reason = reason;
  recorder_.Record(v1::JobEvent::WARNING,
                   absl::StrCat(generations_.Describe(w), " lost: ", reason, "; killing it"));
  resets_.Detected(clock_.Now());
  // Its sockets close when it dies, so peers blocked on it fail at once;
  // its exit (OnWorkerExit) then counts as a failure.
  context_.launcher->Signal(w.handle, SIGKILL).IgnoreError();
}

void JobDriver::ScheduleCooldownWakeup() {
  if (cooldown_timer_ != 0) loop_.Cancel(cooldown_timer_);
  cooldown_timer_ = 0;
  absl::Time next = hosts_.NextCooldownEnd(clock_.Now());
  if (next == absl::InfiniteFuture()) return;
  cooldown_timer_ = loop_.PostAt(next + absl::Milliseconds(1), [this] {
    cooldown_timer_ = 0;
    Replan("a host's cooldown ended", ReplanTrigger::kMembershipChange);
    ScheduleCooldownWakeup();
  });
}

}  // namespace horovodd::daemon
