// What a job's parts record in its events about what they did and decided
// (not the workers' output, which the launcher's I/O threads append to the
// log themselves): each event is stamped with the newest planned
// generation, and each makes a checkpoint due, since a restart must not lose
// it. The lifecycle records its STATE and JOB_ENDED events on its own
// (job_lifecycle.h).
//
// Threading: owned by one JobDriver and used only on its loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "daemon/job_events/event_log.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class EventRecorder {
 public:
  // `log` outlives the recorder; `generation` names the newest planned
  // generation (the planner's); `changed` runs after each event (a
  // checkpoint is due).
  EventRecorder(EventLog& log, std::function<int64_t()> generation, std::function<void()> changed);

  void Record(v1::JobEvent::Kind kind, const std::string& message, const std::string& code = "");
  // An event the caller filled in (beyond kind, message and code).
  void Record(v1::JobEvent event);

 private:
  EventLog& log_;
  const std::function<int64_t()> generation_;
  const std::function<void()> changed_;
};

}  // namespace horovodd::daemon
