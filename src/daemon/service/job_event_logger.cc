#include "daemon/service/job_event_logger.h"

#include "common/log.h"

namespace horovodd::daemon {

void JobEventLogger::OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {
  switch (event.kind()) {
    case v1::JobEvent::OUTPUT:
      return;
    case v1::JobEvent::WARNING:
      HVDD_LOG(WARNING) << job_id << ": " << event.message();
      return;
    case v1::JobEvent::STATE:
      // The INFO and MEMBERSHIP lines around a state change already say why.
      HVDD_LOG(DEBUG) << job_id << ": " << event.message();
      return;
    case v1::JobEvent::JOB_ENDED: {
      const std::string state = v1::JobState_Name(event.state());
      if (event.state() == v1::FAILED) {
        HVDD_LOG(WARNING) << job_id << ": ended " << state << ": " << event.message();
      } else {
        HVDD_LOG(INFO) << job_id << ": ended " << state << ": " << event.message();
      }
      return;
    }
    default:
      HVDD_LOG(INFO) << job_id << ": " << event.message();
  }
}

}  // namespace horovodd::daemon
