// Writes every job event except worker output to the daemon's log
// (common/log.h), one line each, prefixed with the job id: what an operator
// reads in `journalctl -u horovodd`. Worker output stays in the job's own
// event log (horovodctl logs), so a chatty job cannot flood the journal.
#pragma once

#include "daemon/job_events/job_observer.h"

namespace horovodd::daemon {

class JobEventLogger final : public JobObserver {
 public:
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override;
};

}  // namespace horovodd::daemon
