#include "daemon/job_manager.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace horovodd::daemon {

JobManager::~JobManager() { Shutdown("daemon stopped", absl::Seconds(5)); }

absl::StatusOr<std::string> JobManager::Submit(const v1::JobSpec& spec) {
  if (auto st = ValidateJobSpec(spec); !st.ok()) return st;
  std::shared_ptr<JobDriver> driver;
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) return absl::UnavailableError("daemon is shutting down");
    id = absl::StrCat("job-", next_job_number_++);
    driver = std::make_shared<JobDriver>(
        JobContext{id, worker_address_, launcher_, observer_}, spec);
    jobs_[id] = driver;
  }
  if (observer_ != nullptr) observer_->OnJobSubmitted(id, spec, absl::Now());
  driver->Start();
  return id;
}

std::shared_ptr<JobDriver> JobManager::Find(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<JobDriver>> JobManager::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<JobDriver>> out;
  for (const auto& [id, driver] : jobs_) out.push_back(driver);
  return out;
}

absl::Status JobManager::Cancel(const std::string& job_id, const std::string& reason) {
  auto driver = Find(job_id);
  if (!driver) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  driver->Cancel(reason.empty() ? "cancelled by the user" : reason);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> JobManager::SetDrained(const std::string& host,
                                                                const std::string& job_id,
                                                                bool drained) {
  if (host.empty()) return absl::InvalidArgumentError("no host given");
  std::vector<std::shared_ptr<JobDriver>> targets;
  if (!job_id.empty()) {
    auto driver = Find(job_id);
    if (!driver) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
    targets.push_back(driver);
  } else {
    for (auto& driver : List()) {
      if (!driver->Ended()) targets.push_back(driver);
    }
  }
  std::vector<std::string> ids;
  for (auto& driver : targets) {
    if (drained) {
      driver->Drain(host);
    } else {
      driver->Undrain(host);
    }
    ids.push_back(driver->job_id());
  }
  return ids;
}

void JobManager::Shutdown(const std::string& reason, absl::Duration grace) {
  std::vector<std::shared_ptr<JobDriver>> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    for (const auto& [id, driver] : jobs_) jobs.push_back(driver);
  }
  for (auto& job : jobs) job->Cancel(reason);
  // Drivers send SIGTERM, then SIGKILL after their own grace; wait for that.
  const absl::Time deadline = absl::Now() + grace + absl::Seconds(10);
  for (auto& job : jobs) {
    while (!job->Ended() && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace horovodd::daemon
