// How one job ends: when a finishing job has succeeded (every one of its
// finishers finished or gone for good), ending it (the lifecycle's End, then
// its workers stopped: SIGTERM, and SIGKILL for whoever is left after
// kKillGrace), and closing it once every worker is gone (the observers get
// the final status, then JOB_ENDED). The driver decides when a job fails or
// is cancelled; from then on this is the only way out.
//
// Threading: owned by one JobDriver and used on its loop thread.
#pragma once

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "daemon/job/job_context.h"
#include "daemon/job_events/event_recorder.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/loop/event_loop.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/workers/worker_table.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobEnd {
 public:
  // How long workers told to stop (SIGTERM) have before they are killed.
  static constexpr absl::Duration kKillGrace = absl::Seconds(5);

  // Whose finishing ends the job SUCCEEDED.
  enum class Finishers {
    kPlannedMembers,  // a command that never joined a generation (horovodrun -np 2 hostname)
    kReadyMembers,    // the members of the ready generation
  };

  // `stop` stops what still runs for the job once it ends (timers, waits);
  // `status` is the job's status now. Everything given outlives the end.
  JobEnd(const JobContext& context, EventLoop& loop, JobLifecycle& lifecycle, WorkerTable& workers,
         const GenerationPlanner& generations, EventRecorder& recorder, std::function<void()> stop,
         std::function<v1::JobStatus()> status);

  // The job ends `state` (SUCCEEDED, FAILED or CANCELLED) for `reason`, and
  // its workers are stopped. Nothing when it already has ended.
  void Finish(v1::JobState state, const std::string& reason);
  // For a finishing job: ends it SUCCEEDED once every one of `finishers` has
  // finished or is gone for good (see the .cc).
  void MaybeFinishSucceeded(Finishers finishers);
  // A worker's process is gone, or will never be: once every one is, a
  // stopping job is closed.
  void MaybeCloseLog();

 private:
  const JobContext& context_;
  EventLoop& loop_;
  JobLifecycle& lifecycle_;
  WorkerTable& workers_;
  const GenerationPlanner& generations_;
  EventRecorder& recorder_;
  const std::function<void()> stop_;
  const std::function<v1::JobStatus()> status_;
};

}  // namespace horovodd::daemon
