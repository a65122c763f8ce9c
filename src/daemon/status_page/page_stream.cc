#include "daemon/status_page/page_stream.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "daemon/status_page/page_json.h"

namespace horovodd::daemon {
namespace {

// Writes and remembers when it last did, for the keep-alive.
class Feed {
 public:
  explicit Feed(HttpStream& out) : out_(out) {}
  bool Send(const std::string& text) {
    last_write_ = absl::Now();
    return out_.Write(text);
  }
  // Sends `json` as event `name` unless it is what was sent last under that name.
  bool SendIfChanged(const char* name, std::string json, std::string& last) {
    if (json == last) return true;
    last = std::move(json);
    return Send(SseEvent(name, last));
  }
  absl::Time last_write() const { return last_write_; }

 private:
  HttpStream& out_;
  absl::Time last_write_ = absl::Now();
};

// The batch's events that are not worker output, as `log` messages.
bool SendEvents(Feed& feed, const std::vector<v1::JobEvent>& batch, size_t per_message) {
  std::vector<v1::JobEvent> shown;
  for (const v1::JobEvent& event : batch) {
    if (event.kind() != v1::JobEvent::OUTPUT) shown.push_back(event);
  }
  for (size_t begin = 0; begin < shown.size(); begin += per_message) {
    const size_t end = std::min(shown.size(), begin + per_message);
    const std::vector<v1::JobEvent> part(shown.begin() + begin, shown.begin() + end);
    if (!feed.Send(SseEvent("log", EventsJson(part), part.back().seq()))) return false;
  }
  return true;
}

}  // namespace

void RunPageStream(PageJobs& jobs, const StreamRequest& request, const StreamTimings& timings,
                   HttpStream& out) {
  Feed feed(out);
  if (!feed.Send("retry: 2000\n\n") ||
      !feed.Send(SseEvent("hello", SessionJson(request.admin, absl::Now())))) {
    return;
  }
  std::optional<PageJobs::EventReader> events;
  if (!request.job_id.empty()) {
    absl::StatusOr<PageJobs::EventReader> found = jobs.Events(request.job_id);
    if (found.ok()) {
      events = *std::move(found);
    } else if (!feed.Send(SseEvent("missing", ErrorJson(found.status().message())))) {
      return;
    }
  }
  uint64_t next_seq = request.from_seq;
  std::string last_jobs, last_job;
  absl::Time next_look = absl::InfinitePast();
  while (true) {
    if (events) {
      // Waits for the job's next events, at most until the next look.
      EventLog::Batch batch = (*events)(next_seq, std::max(next_look, absl::Now()));
      if (!SendEvents(feed, batch.events, timings.max_events_per_message)) return;
      next_seq = batch.next_seq;
      // Once closed (the job ended) nothing more comes; its final status
      // goes out now.
      if (batch.closed) {
        events.reset();
        next_look = absl::Now();
      }
      // Events flow while the job trains; a client that hung up is noticed here.
      if (!out.Wait(absl::ZeroDuration())) return;
    } else if (!out.Wait(std::max(next_look - absl::Now(), absl::ZeroDuration()))) {
      return;
    }
    const absl::Time now = absl::Now();
    if (now >= next_look) {
      next_look = now + timings.status_interval;
      if (!feed.SendIfChanged("jobs", JobsJson(jobs.List()), last_jobs)) return;
      if (!request.job_id.empty()) {
        absl::StatusOr<v1::JobStatus> status = jobs.Get(request.job_id);
        if (status.ok() && !feed.SendIfChanged("job", JobJson(*status), last_job)) return;
      }
    }
    if (now - feed.last_write() >= timings.keepalive && !feed.Send(": keep-alive\n\n")) return;
  }
}

}  // namespace horovodd::daemon
