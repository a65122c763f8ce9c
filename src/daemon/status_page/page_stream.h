// The page's live feed (GET /api/stream): server-sent events that keep an
// open page current without reloads. In order:
//
//   retry: 2000                       a lost stream is reopened after 2 s
//   event: hello   SessionJson        what the caller may do, the daemon's clock
//   event: jobs    JobsJson           the jobs table, again whenever it changes
// and with ?job=JOB:
//   event: log     EventsJson, id     JOB's events but worker output, from the
//                                     first kept (or after Last-Event-ID), as
//                                     they happen; id is the last one's seq
//   event: job     JobJson            JOB's status, again whenever it changes
//   event: missing ErrorJson          JOB is not known
//
// plus a comment line when nothing was sent for a while, so proxies keep the
// connection and a client that left is noticed. Statuses are looked at once
// per StreamTimings::status_interval and sent only when they changed.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "daemon/http/http_message.h"
#include "daemon/status_page/page_jobs.h"

namespace horovodd::daemon {

struct StreamTimings {
  absl::Duration status_interval = absl::Seconds(1);
  absl::Duration keepalive = absl::Seconds(15);
  // Events per `log` message, so that a long history goes in pieces.
  size_t max_events_per_message = 500;
};

struct StreamRequest {
  std::string job_id;     // empty: the jobs table only
  uint64_t from_seq = 0;  // the first event wanted (0: the oldest kept)
  bool admin = false;     // for hello
};

// Writes the feed to `out` until the client leaves or the server stops.
void RunPageStream(PageJobs& jobs, const StreamRequest& request, const StreamTimings& timings,
                   HttpStream& out);

}  // namespace horovodd::daemon
