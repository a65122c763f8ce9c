// JobDriver: what comes of starting a worker. The launch itself (its
// environment, on this machine or on the job's launch pool) is the
// starter's (worker_starter.h); here the worker joins the books, and a
// failed start costs its host a cooldown or, when no worker can start
// anywhere, ends the job.
#include <csignal>

#include "absl/strings/str_cat.h"
#include "daemon/job/job_driver.h"

namespace horovodd::daemon {

void JobDriver::LaunchWorker(const std::string& host, int planned_rank) {
  Worker& w = workers_.Add(host, planned_rank);
  const int64_t id = w.id;
  liveness_.Launched(id, clock_.Now());
  std::optional<absl::StatusOr<LaunchedProcess>> launched = starter_.Launch(w, planned_rank);
  if (!launched.has_value()) {
    // Starting on another host: a member from now on, as a local worker
    // would be; the generation waits for it as for any member that has not
    // joined yet (OnRemoteLaunched).
    w.launching = true;
    generations_.AddMember(id);
    return;
  }
  if (!launched->ok()) {
    // Never started: as if it had never been planned.
    liveness_.Forget(id);
    workers_.Erase(id);
    if (starter_.FailsEverywhere(launched->status(), /*on_loop=*/true)) {
      Finish(v1::FAILED, absl::StrCat("cannot start workers: ", launched->status().message()));
      return;
    }
    OnHostLaunchFailure(host, launched->status());
    return;
  }
  WorkerTable::Started(w, **launched);
  recorder_.Record(v1::JobEvent::INFO,
                   absl::StrCat("started worker ", id, " on ", host, " (pid ", w.pid, ")"));
  generations_.AddMember(id);
}

void JobDriver::OnHostLaunchFailure(const std::string& host, const absl::Status& status) {
  // The host is the problem (unreachable, refused): it sits out a cooldown
  // and the job goes on with the others.
  const std::string why(status.message());
  hosts_.ReportFailure(host, why, clock_.Now());
  recorder_.Record(v1::JobEvent::WARNING,
                   absl::StrCat("cannot start a worker on ", host, ": ", why, "; host in cooldown"),
                   "launch_failed");
  ScheduleCooldownWakeup();
  loop_.Post([this] { Replan("a worker could not be started", ReplanTrigger::kMembershipChange); });
}

void JobDriver::OnRemoteLaunched(int64_t id, const absl::StatusOr<LaunchedProcess>& launched) {
  Worker* w = workers_.Find(id);
  if (w == nullptr) return;
  if (!w->launching) {
    // It already exited (its on_exit overtook this): only the pid is news.
    if (launched.ok()) w->pid = launched->pid;
    return;
  }
  w->launching = false;
  if (!launched.ok()) {
    // Never started: the job goes on as if it had never been planned.
    const std::string host = w->host;
    generations_.RemoveMember(id);
    liveness_.Forget(id);
    workers_.Erase(id);
    if (lifecycle_.Terminal()) {
      MaybeCloseLog();
      return;
    }
    if (starter_.FailsEverywhere(launched.status(), /*on_loop=*/false)) {
      Finish(v1::FAILED, absl::StrCat("cannot start workers: ", launched.status().message()));
      return;
    }
    OnHostLaunchFailure(host, launched.status());
    if (lifecycle_.Finishing()) {
      MaybeFinishSucceeded(generations_.ready_generation() == 0 ? Finishers::kPlannedMembers
                                                                : Finishers::kReadyMembers);
    }
    NotifyOnceJoinersWait();
    TryCompleteRendezvous();
    return;
  }
  WorkerTable::Started(*w, *launched);
  recorder_.Record(v1::JobEvent::INFO,
                   absl::StrCat("started worker ", id, " on ", w->host, " (pid ", w->pid, ")"));
  // What happened to it while it was starting, the others already had.
  if (lifecycle_.Terminal() || !w->lost_reason.empty()) {
    context_.launcher->Signal(w->handle, SIGKILL).IgnoreError();
  } else if (w->state == v1::WORKER_REMOVED) {
    context_.launcher->Signal(w->handle, SIGTERM).IgnoreError();
  }
}

}  // namespace horovodd::daemon
