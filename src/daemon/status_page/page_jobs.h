// What the status page reads and does: the data of JobService (ListJobs,
// GetJob, WatchJob, CancelJob, DrainHost, UndrainHost) without gRPC. The
// daemon's is PageJobsOf(JobManager), the object JobServiceImpl itself
// calls, so the page and horovodctl see the same jobs, statuses and events
// by the same code; tests give the page a fake.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/job_events/event_log.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobManager;

class PageJobs {
 public:
  // A job's events with seq >= from_seq, waiting until the deadline for one
  // while the job runs (JobEventReader::From).
  using EventReader = std::function<EventLog::Batch(uint64_t from_seq, absl::Time deadline)>;

  virtual ~PageJobs() = default;
  // Every job, archived and live, in submission order (ListJobs).
  virtual std::vector<v1::JobStatus> List() = 0;
  // NOT_FOUND for a job the daemon does not know (GetJob).
  virtual absl::StatusOr<v1::JobStatus> Get(const std::string& job_id) = 0;
  // NOT_FOUND likewise (WatchJob).
  virtual absl::StatusOr<EventReader> Events(const std::string& job_id) = 0;
  // FAILED_PRECONDITION for a job that already ended (CancelJob).
  virtual absl::Status Cancel(const std::string& job_id, const std::string& reason) = 0;
  // The jobs it applied to: `job_id`'s, or every running one when empty
  // (DrainHost, UndrainHost).
  virtual absl::StatusOr<std::vector<std::string>> SetDrained(const std::string& host,
                                                              const std::string& job_id,
                                                              bool drained) = 0;
};

// The daemon's jobs; `jobs` outlives the result.
std::unique_ptr<PageJobs> PageJobsOf(JobManager* jobs);

}  // namespace horovodd::daemon
