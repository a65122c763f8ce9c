#include "daemon/status_page/page_jobs.h"

#include "daemon/job/job_manager.h"

namespace horovodd::daemon {
namespace {

class ManagerJobs final : public PageJobs {
 public:
  explicit ManagerJobs(JobManager* jobs) : jobs_(jobs) {}

  std::vector<v1::JobStatus> List() override { return jobs_->Statuses(); }
  absl::StatusOr<v1::JobStatus> Get(const std::string& job_id) override {
    return jobs_->Status(job_id);
  }
  absl::StatusOr<EventReader> Events(const std::string& job_id) override {
    absl::StatusOr<JobEventReader> reader = jobs_->Events(job_id);
    if (!reader.ok()) return reader.status();
    return EventReader([reader = *std::move(reader)](uint64_t from_seq, absl::Time deadline) {
      return reader.From(from_seq, deadline);
    });
  }
  absl::Status Cancel(const std::string& job_id, const std::string& reason) override {
    return jobs_->Cancel(job_id, reason);
  }
  absl::StatusOr<std::vector<std::string>> SetDrained(const std::string& host,
                                                      const std::string& job_id,
                                                      bool drained) override {
    return jobs_->SetDrained(host, job_id, drained);
  }

 private:
  JobManager* const jobs_;
};

}  // namespace

std::unique_ptr<PageJobs> PageJobsOf(JobManager* jobs) {
  return std::make_unique<ManagerJobs>(jobs);
}

}  // namespace horovodd::daemon
