#include "daemon/job_events/event_recorder.h"

#include <utility>

namespace horovodd::daemon {

EventRecorder::EventRecorder(EventLog& log, std::function<int64_t()> generation,
                             std::function<void()> changed)
    : log_(log), generation_(std::move(generation)), changed_(std::move(changed)) {}

void EventRecorder::Record(v1::JobEvent::Kind kind, const std::string& message,
                           const std::string& code) {
  v1::JobEvent e;
  e.set_kind(kind);
  e.set_message(message);
  e.set_code(code);
  Record(std::move(e));
}

void EventRecorder::Record(v1::JobEvent event) {
  event.set_generation(generation_());
  log_.Append(std::move(event));
  changed_();
}

}  // namespace horovodd::daemon
