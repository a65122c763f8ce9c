#include "daemon/journal/journal.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

absl::Status CheckJournalLimits(const JournalLimits& limits) {
  if (limits.max_events_per_job < 1 || limits.max_finished_jobs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("journal limits must be at least 1 (events per job ",
                     limits.max_events_per_job, ", finished jobs ", limits.max_finished_jobs, ")"));
  }
  return absl::OkStatus();
}

std::vector<ArchivedJob> SplitOffResumable(std::vector<ArchivedJob> all,
                                           std::map<std::string, JobCheckpoint> checkpoints,
                                           std::vector<ResumableJob>* running) {
  if (checkpoints.empty()) return all;
  std::vector<ArchivedJob> archived;
  for (ArchivedJob& job : all) {
    auto it = checkpoints.find(job.status.job_id());
    if (it == checkpoints.end()) {
      archived.push_back(std::move(job));
      continue;
    }
    ResumableJob resume;
    resume.job_id = job.status.job_id();
    resume.spec = job.status.spec();
    resume.client_request_id = job.status.client_request_id();
    resume.created = absl::FromUnixMicros(static_cast<int64_t>(job.status.created_unix() * 1e6));
    resume.checkpoint = std::move(it->second);
    running->push_back(std::move(resume));
  }
  return archived;
}

}  // namespace horovodd::daemon
