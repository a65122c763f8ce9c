#include "daemon/service/job_event_logger.h"

#include <spdlog/spdlog.h>

namespace horovodd::daemon {

void JobEventLogger::OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {
  switch (event.kind()) {
    case v1::JobEvent::OUTPUT:
      return;
    case v1::JobEvent::WARNING:
      spdlog::warn("{}: {}", job_id, event.message());
      return;
    case v1::JobEvent::STATE:
      // The INFO and MEMBERSHIP lines around a state change already say why.
      spdlog::debug("{}: {}", job_id, event.message());
      return;
    case v1::JobEvent::JOB_ENDED: {
      const std::string state = v1::JobState_Name(event.state());
      if (event.state() == v1::FAILED) {
        spdlog::warn("{}: ended {}: {}", job_id, state, event.message());
      } else {
        spdlog::info("{}: ended {}: {}", job_id, state, event.message());
      }
      return;
    }
    default:
      spdlog::info("{}: {}", job_id, event.message());
  }
}

}  // namespace horovodd::daemon
