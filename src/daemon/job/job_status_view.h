// What one job's status says (v1::JobStatus: horovodctl status, the final
// status the observers get, the checkpoint), read from the parts that keep
// it: the spec, the lifecycle, the generations, the workers, the hosts, the
// resets, the goodput ledger and the recent events. It keeps nothing of its
// own.
//
// Threading: owned by one JobDriver and used on its loop thread.
#pragma once

#include <string>

#include "daemon/goodput/goodput_ledger.h"
#include "daemon/job/job_context.h"
#include "daemon/job_events/event_log.h"
#include "daemon/job_events/reset_history.h"
#include "daemon/job_lifecycle/job_lifecycle.h"
#include "daemon/loop/clock.h"
#include "daemon/membership/generation_planner.h"
#include "daemon/stall/stall_detector.h"
#include "daemon/workers/worker_table.h"
#include "discovery/host_manager.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobStatusView {
 public:
  // Everything given outlives the view.
  JobStatusView(const JobContext& context, const v1::JobSpec& spec, const Clock& clock,
                const JobLifecycle& lifecycle, const WorkerTable& workers,
                const GenerationPlanner& generations, const discovery::HostManager& hosts,
                const ResetHistory& resets, const GoodputLedger& goodput, const EventLog& events);

  // The stall its detector has named (and its stragglers) are shown too;
  // `detector` outlives the view.
  void ShowStalls(const StallDetector* detector) { stall_ = detector; }

  // The job's status now.
  v1::JobStatus Now() const;

 private:
  const JobContext& context_;
  const v1::JobSpec& spec_;
  const Clock& clock_;
  const JobLifecycle& lifecycle_;
  const WorkerTable& workers_;
  const GenerationPlanner& generations_;
  const discovery::HostManager& hosts_;
  const ResetHistory& resets_;
  const GoodputLedger& goodput_;
  const EventLog& events_;
  const StallDetector* stall_ = nullptr;
};

}  // namespace horovodd::daemon
