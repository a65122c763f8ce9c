// horovodctl's commands, each one JobService call (or a stream) and its
// output. main() parses the command line and maps a returned error to
// "horovodctl: error: ..." and exit code 1.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/horovodctl/horovodctl_client.h"
#include "cli/horovodctl/horovodctl_format.h"

namespace horovodd::cli {

enum class OutputFormat { kTable, kJson };

struct CommandContext {
  JobClient* client = nullptr;
  OutputFormat format = OutputFormat::kTable;
  std::ostream* out = nullptr;
  absl::TimeZone zone = absl::LocalTimeZone();
};

absl::Status ListJobs(const CommandContext& ctx);
absl::Status ShowJob(const CommandContext& ctx, const std::string& job_id);
// The hosts of every running job.
absl::Status ShowHosts(const CommandContext& ctx);

// Stops the daemon: its running jobs are left to the next daemon on the same state dir
// (unless shutdown.stop_jobs), or ended first (CANCELLED, with `reason`) with stop_jobs.
absl::Status StopDaemon(const CommandContext& ctx, bool stop_jobs, const std::string& reason);
// The newest `max_lines` output lines of `rank`.
absl::Status ShowLogs(const CommandContext& ctx, const std::string& job_id, int rank,
                      int max_lines);

struct CancelOptions {
  std::string job_id;
  std::string reason;
  bool wait = false;  // until the job has ended and its workers are gone
};
absl::Status CancelJob(const CommandContext& ctx, const CancelOptions& options);

// Drains (drained=true) or undrains `host` in `job_id`, or in every running job.
absl::Status SetDrained(const CommandContext& ctx, const std::string& host,
                        const std::string& job_id, bool drained);

// Prints the job's events (all kept ones, then live) until it ends. Returns
// the exit code: 0 if the job succeeded, 1 if it failed or was cancelled.
absl::StatusOr<int> WatchJob(const CommandContext& ctx, const std::string& job_id,
                             const WatchFilter& filter);

}  // namespace horovodd::cli
