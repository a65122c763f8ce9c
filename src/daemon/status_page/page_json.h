// The JSON the status page serves, and the server-sent events that carry it.
// Jobs, statuses and events are printed by MessageToJson, as `horovodctl
// --output json` prints them: the proto's field names, every field (defaults
// included), 64-bit integers as numbers. So a field added to JobStatus,
// WorkerStatus or HostStatus reaches the page with no change here; the page
// shows it once its table names it (assets/app.js).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// A job as the jobs table shows it: the status without its workers, hosts,
// reset history, recent events and the spec's environment (those are the
// one job's view; a list of many jobs stays small).
v1::JobStatus JobSummary(const v1::JobStatus& status);

// {"jobs":[...]}: JobSummary of each, in order.
std::string JobsJson(const std::vector<v1::JobStatus>& jobs);
// The whole status: horovodctl --output json status, on one line.
std::string JobJson(const v1::JobStatus& status);
// {"events":[...]}: the events given, in order.
std::string EventsJson(const std::vector<v1::JobEvent>& events);
// {"access":"admin"|"read","server_time_unix":T}: what the caller may do,
// and the daemon's clock, against which the page counts ages and cooldowns.
std::string SessionJson(bool admin, absl::Time now);
// {"error":"MESSAGE"}.
std::string ErrorJson(absl::string_view message);

// One server-sent event: "id: ID\n" (when given), "event: NAME\n", a
// "data: " line per line of `data`, and the blank line that ends it.
std::string SseEvent(absl::string_view name, absl::string_view data,
                     std::optional<uint64_t> id = std::nullopt);

}  // namespace horovodd::daemon
