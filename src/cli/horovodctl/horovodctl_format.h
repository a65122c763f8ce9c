// What horovodctl prints: human tables and lines, and the JSON documents of
// --output json. Pure functions of the daemon's messages (plus the current
// time and the time zone for ages and clock times), so they are unit tested
// without a daemon.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::cli {

// "850ms", "42s", "3m05s", "2h07m", "3d04h": the two biggest units.
std::string HumanDuration(absl::Duration d);
// A latency in seconds with millisecond precision: "0.022 s".
std::string Latency(double seconds);
bool IsTerminal(v1::JobState state);

// `list`: one row per job (id, state, generation, size, min/max, resets, age,
// goodput when the daemon reports it, command).
std::string FormatJobTable(const std::vector<v1::JobStatus>& jobs, absl::Time now);

// `status`: a header (with the goodput), then the workers, hosts, resets,
// where the time went (each part of the goodput) and recent events.
std::string FormatJobDetails(const v1::JobStatus& job, absl::Time now, absl::TimeZone zone);

// `hosts`: the hosts of every job that has not ended.
struct HostRow {
  std::string host;
  std::string job_id;
  int slots = 0;
  std::string state;  // usable | cooldown | drained | lost
  double cooldown_seconds_left = 0;
};
std::vector<HostRow> HostsOfRunningJobs(const std::vector<v1::JobStatus>& jobs);
std::string FormatHostTable(const std::vector<HostRow>& rows);
std::string HostRowsToJson(const std::vector<HostRow>& rows);

// `watch`: which events it shows, one line each.
struct WatchFilter {
  bool info = false;          // the driver's INFO events (workers started, left, ...)
  bool output_lines = false;  // worker output
};
// The line for `event` (no trailing newline), or nullopt if `filter` hides it.
std::optional<std::string> FormatWatchLine(const v1::JobEvent& event, const WatchFilter& filter,
                                           absl::TimeZone zone);
bool WatchShows(const v1::JobEvent& event, const WatchFilter& filter);

}  // namespace horovodd::cli
