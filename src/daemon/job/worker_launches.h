// What comes of starting a job's workers. A worker the driver plans joins
// the books as it is launched (the worker table, the liveness monitor, the
// planned generation's members); one that does not start leaves them again,
// as if it had never been planned, and its host sits out a cooldown
// (JobHosts::LaunchFailed) unless no worker can start anywhere, which ends
// the job (JobEnd). A stopping job may close, a finishing one succeed, once
// a member never started. The launch itself, its environment and the pool
// remote launches run on are the starter's (worker_starter.h); which workers
// to start is the driver's.
//
// Threading: owned by one JobDriver and used on its loop thread; the
// starter posts each remote launch's outcome to the loop (Launched).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/job/job_context.h"
#include "daemon/job/job_end.h"
#include "daemon/job/worker_starter.h"
#include "daemon/job_events/event_recorder.h"
#include "daemon/job_hosts/job_hosts.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/launch/launcher.h"
#include "daemon/loop/clock.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/workers/liveness_monitor.h"
#include "daemon/workers/worker_table.h"

namespace horovodd::daemon {

class WorkerLaunches {
 public:
  // A member being started on another host never started and left the
  // books: the planned generation may form without it.
  using DroppedHandler = std::function<void()>;

  // Everything given outlives the launches; `on_dropped` runs on the loop.
  WorkerLaunches(const JobContext& context, const JobLifecycle& lifecycle, WorkerTable& workers,
                 GenerationPlanner& generations, LivenessMonitor& liveness, JobHosts& hosts,
                 EventRecorder& recorder, WorkerStarter& starter, JobEnd& end,
                 DroppedHandler on_dropped);

  // Starts a worker on `host` as rank `planned_rank` of the generation
  // planned now, a member of it from now on; or, when it cannot start here,
  // forgets it as if it had never been planned.
  void Launch(const std::string& host, int planned_rank);
  // Starts a hot spare on `host`: a worker outside every generation, with
  // the environment of rank `next_rank`, the first rank after the members'.
  // One that cannot start here is forgotten, its host cooling down.
  void LaunchSpare(const std::string& host, int next_rank);
  // What came of launching worker `id` on another host (the starter's
  // on_launched).
  void Launched(int64_t id, const absl::StatusOr<LaunchedProcess>& launched);

 private:
  // Starts `w`'s process with the environment of rank `rank`: true when it
  // runs, or is being started on another host (Launched says what came of
  // it); false when it cannot start here (NeverStarted: `w` is gone).
  bool StartProcess(Worker& w, int rank);
  // A launch that failed on the loop: the worker leaves the table.
  void NeverStarted(int64_t id, const std::string& host, const absl::Status& status);
  // The job's event for `w`'s process having started.
  void RecordStarted(const Worker& w);

  const JobContext& context_;
  const Clock& clock_;
  const JobLifecycle& lifecycle_;
  WorkerTable& workers_;
  GenerationPlanner& generations_;
  LivenessMonitor& liveness_;
  JobHosts& hosts_;
  EventRecorder& recorder_;
  WorkerStarter& starter_;
  JobEnd& end_;
  const DroppedHandler on_dropped_;
};

}  // namespace horovodd::daemon
