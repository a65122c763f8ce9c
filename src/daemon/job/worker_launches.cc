#include "daemon/job/worker_launches.h"

#include <csignal>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/check.h"

namespace horovodd::daemon {

WorkerLaunches::WorkerLaunches(const JobContext& context, const JobLifecycle& lifecycle,
                               WorkerTable& workers, GenerationPlanner& generations,
                               LivenessMonitor& liveness, JobHosts& hosts, EventRecorder& recorder,
                               WorkerStarter& starter, JobEnd& end, DroppedHandler on_dropped)
    : context_(context),
      clock_(*context.clock),
      lifecycle_(lifecycle),
      workers_(workers),
      generations_(generations),
      liveness_(liveness),
      hosts_(hosts),
      recorder_(recorder),
      starter_(starter),
      end_(end),
      on_dropped_(std::move(on_dropped)) {}

void WorkerLaunches::Launch(const std::string& host, int planned_rank) {
  HVDD_CHECK(lifecycle_.MayPlan())
      << "a worker launched while the job is " << JobLifecycle::PhaseName(lifecycle_.phase());
  Worker& w = workers_.Add(host, planned_rank);
  const int64_t id = w.id;
  // A member from now on, also while it starts on another host: the
  // generation waits for it as for any member that has not joined yet.
  if (StartProcess(w, planned_rank)) generations_.AddMember(id);
}

bool WorkerLaunches::StartProcess(Worker& w, int rank) {
  const int64_t id = w.id;
  liveness_.Launched(id, clock_.Now());
  std::optional<absl::StatusOr<LaunchedProcess>> launched = starter_.Launch(w, rank);
  if (!launched.has_value()) {
    w.launching = true;  // on another host: Launched says what came of it
    return true;
  }
  if (!launched->ok()) {
    const std::string host = w.host;  // NeverStarted forgets `w`
    NeverStarted(id, host, launched->status());
    return false;
  }
  WorkerTable::Started(w, **launched);
  RecordStarted(w);
  return true;
}

void WorkerLaunches::RecordStarted(const Worker& w) {
  recorder_.Record(v1::JobEvent::INFO, absl::StrCat("started ", IsSpare(w) ? "spare " : "worker ",
                                                    w.id, " on ", w.host, " (pid ", w.pid, ")"));
}

void WorkerLaunches::NeverStarted(int64_t id, const std::string& host, const absl::Status& status) {
  // As if it had never been planned; its host sits out a cooldown, unless no
  // worker can start anywhere.
  liveness_.Forget(id);
  workers_.Erase(id);
  if (starter_.FailsEverywhere(status, /*on_loop=*/true)) {
    end_.Finish(v1::FAILED, absl::StrCat("cannot start workers: ", status.message()));
    return;
  }
  hosts_.LaunchFailed(host, status);
}

void WorkerLaunches::LaunchSpare(const std::string& host, int next_rank) {
  HVDD_CHECK(lifecycle_.MayPlan())
      << "a spare launched while the job is " << JobLifecycle::PhaseName(lifecycle_.phase());
  Worker& w = workers_.Add(host, -1);
  w.state = v1::WORKER_SPARE_STARTING;
  StartProcess(w, next_rank);
}

void WorkerLaunches::Launched(int64_t id, const absl::StatusOr<LaunchedProcess>& launched) {
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
      end_.MaybeCloseLog();
      return;
    }
    if (starter_.FailsEverywhere(launched.status(), /*on_loop=*/false)) {
      end_.Finish(v1::FAILED, absl::StrCat("cannot start workers: ", launched.status().message()));
      return;
    }
    hosts_.LaunchFailed(host, launched.status());
    if (lifecycle_.Finishing()) {
      end_.MaybeFinishSucceeded(generations_.ready_generation() == 0
                                    ? JobEnd::Finishers::kPlannedMembers
                                    : JobEnd::Finishers::kReadyMembers);
    }
    on_dropped_();
    return;
  }
  WorkerTable::Started(*w, *launched);
  RecordStarted(*w);
  // What happened to it while it was starting, the others already had.
  if (lifecycle_.Terminal() || !w->lost_reason.empty()) {
    context_.launcher->Signal(w->handle, SIGKILL).IgnoreError();
  } else if (w->state == v1::WORKER_REMOVED) {
    context_.launcher->Signal(w->handle, SIGTERM).IgnoreError();
  }
}

}  // namespace horovodd::daemon
