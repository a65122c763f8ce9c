#include "daemon/job/job_manager.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "daemon/auth/auth_token.h"

namespace horovodd::daemon {
namespace {

constexpr absl::string_view kJobIdPrefix = "job-";

// N of "job-N"; 0 for an id of another form.
int64_t JobNumber(const std::string& job_id) {
  int64_t number = 0;
  if (!absl::StartsWith(job_id, kJobIdPrefix) ||
      !absl::SimpleAtoi(absl::string_view(job_id).substr(kJobIdPrefix.size()), &number)) {
    return 0;
  }
  return number;
}

absl::Status AlreadyEnded(const std::string& job_id, v1::JobState state) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, " already ended (", v1::JobState_Name(state), ")"));
}

absl::Status NoSuchJob(const std::string& job_id) {
  return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
}

}  // namespace

JobManager::~JobManager() { Shutdown("daemon stopped", absl::Seconds(5)); }

absl::StatusOr<std::string> JobManager::Submit(const v1::JobSpec& spec,
                                               const std::string& client_request_id) {
  if (auto st = ValidateJobSpec(spec); !st.ok()) return st;
  {
    // Answered even while the store cannot take records: nothing is written.
    absl::MutexLock lock(&mu_);
    HVDD_ASSIGN_OR_RETURN(std::string earlier, RepeatedLocked(client_request_id, spec));
    if (!earlier.empty()) return earlier;
  }
  if (store_ != nullptr) HVDD_RETURN_IF_ERROR(store_->Writable());
  absl::StatusOr<std::string> worker_token = GenerateToken();
  if (!worker_token.ok()) return worker_token.status();
  std::shared_ptr<JobDriver> driver;
  std::string id;
  std::vector<std::shared_ptr<JobDriver>> forgotten;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("daemon is shutting down");
    // Checked again under the lock that adds the job: two submissions with
    // one id racing each other make one job.
    HVDD_ASSIGN_OR_RETURN(std::string earlier, RepeatedLocked(client_request_id, spec));
    if (!earlier.empty()) return earlier;
    id = absl::StrCat(kJobIdPrefix, next_job_number_++);
    driver = std::make_shared<JobDriver>(
        JobContext{id, worker_address_, launcher_, observer_, std::move(*worker_token), worker_env_,
                   kv_limits_, &RealClock(), checkpoints_, client_request_id, gate_},
        spec);
    jobs_[id] = driver;
    if (!client_request_id.empty()) job_of_request_[client_request_id] = id;
    forgotten = ForgetOldEndedLocked();
  }
  forgotten.clear();  // outside the lock: destroying a driver joins its loop
  if (observer_ != nullptr) {
    observer_->OnJobSubmitted(id, spec, RealClock().Now(), client_request_id);
  }
  driver->Start();
  return id;
}

std::string JobManager::JobOfRequest(const std::string& client_request_id) const {
  if (client_request_id.empty()) return "";
  absl::MutexLock lock(&mu_);
  auto it = job_of_request_.find(client_request_id);
  return it == job_of_request_.end() ? "" : it->second;
}

absl::StatusOr<std::string> JobManager::RepeatedLocked(const std::string& client_request_id,
                                                       const v1::JobSpec& spec) const {
  if (client_request_id.empty()) return std::string();
  auto it = job_of_request_.find(client_request_id);
  if (it == job_of_request_.end()) return std::string();
  const std::string& id = it->second;
  const v1::JobSpec* earlier = nullptr;
  if (auto live = jobs_.find(id); live != jobs_.end()) {
    earlier = &live->second->spec();
  } else if (auto old = archived_.find(id); old != archived_.end()) {
    earlier = &old->second->status.spec();
  }
  HVDD_CHECK(earlier != nullptr) << "client request id " << client_request_id << " names " << id
                                 << ", which is neither live nor archived";
  if (!google::protobuf::util::MessageDifferencer::Equals(*earlier, spec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("client_request_id '", client_request_id, "' was used to submit ", id,
                     ", whose spec differs from this one; a new job needs a new id"));
  }
  return id;
}

std::shared_ptr<JobDriver> JobManager::Readmit(const std::string& job_id, const v1::JobSpec& spec,
                                               std::string worker_token,
                                               const std::string& client_request_id) {
  absl::MutexLock lock(&mu_);
  next_job_number_ = std::max(next_job_number_, JobNumber(job_id) + 1);
  auto driver = std::make_shared<JobDriver>(
      JobContext{job_id, worker_address_, launcher_, observer_, std::move(worker_token),
                 worker_env_, kv_limits_, &RealClock(), checkpoints_, client_request_id, gate_},
      spec);
  jobs_[job_id] = driver;
  archived_.erase(job_id);
  if (!client_request_id.empty()) job_of_request_[client_request_id] = job_id;
  return driver;
}

void JobManager::Abandon() {
  std::vector<std::shared_ptr<JobDriver>> jobs;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    abandoned_ = true;
    for (const auto& [id, driver] : jobs_) jobs.push_back(driver);
  }
  for (auto& job : jobs) job->Abandon();
}

std::vector<std::shared_ptr<JobDriver>> JobManager::ForgetOldEndedLocked() {
  // Job numbers give the submission order of live and archived jobs alike.
  std::map<int64_t, std::string> ended;
  for (const auto& [id, driver] : jobs_) {
    if (driver->Ended()) ended.emplace(JobNumber(id), id);
  }
  for (const auto& [id, job] : archived_) ended.emplace(JobNumber(id), id);
  std::vector<std::shared_ptr<JobDriver>> forgotten;
  size_t excess = ended.size() > kMaxEndedJobs ? ended.size() - kMaxEndedJobs : 0;
  std::set<std::string> gone;
  for (auto it = ended.begin(); excess > 0; ++it, --excess) {
    gone.insert(it->second);
    auto live = jobs_.find(it->second);
    if (live != jobs_.end()) {
      forgotten.push_back(std::move(live->second));
      jobs_.erase(live);
    } else {
      archived_.erase(it->second);
    }
  }
  for (auto it = job_of_request_.begin(); !gone.empty() && it != job_of_request_.end();) {
    it = gone.count(it->second) > 0 ? job_of_request_.erase(it) : std::next(it);
  }
  return forgotten;
}

void JobManager::AddArchived(std::vector<ArchivedJob> jobs) {
  absl::MutexLock lock(&mu_);
  for (auto& job : jobs) {
    const std::string id = job.status.job_id();
    next_job_number_ = std::max(next_job_number_, JobNumber(id) + 1);
    if (jobs_.count(id) == 0) {
      if (!job.status.client_request_id().empty()) {
        job_of_request_[job.status.client_request_id()] = id;
      }
      archived_[id] = std::make_shared<const ArchivedJob>(std::move(job));
    }
  }
}

std::shared_ptr<JobDriver> JobManager::Find(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<const ArchivedJob> JobManager::FindArchived(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = archived_.find(job_id);
  return it == archived_.end() ? nullptr : it->second;
}

bool JobManager::IsWorkerToken(absl::string_view token) const {
  absl::MutexLock lock(&mu_);
  bool known = false;
  for (const auto& [id, driver] : jobs_) known |= TokensMatch(token, driver->worker_token());
  return known;
}

std::vector<std::shared_ptr<JobDriver>> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<JobDriver>> out;
  for (const auto& [id, driver] : jobs_) out.push_back(driver);
  return out;
}

absl::StatusOr<v1::JobStatus> JobManager::Status(const std::string& job_id) const {
  if (auto archived = FindArchived(job_id)) return archived->status;
  // Outside mu_: the driver answers from its own loop.
  if (auto driver = Find(job_id)) return driver->Status();
  return NoSuchJob(job_id);
}

EventLog::Batch JobEventReader::From(uint64_t from_seq, absl::Time deadline) const {
  if (driver_) return driver_->events().WaitFrom(from_seq, deadline);
  EventLog::Batch batch;
  batch.closed = true;
  batch.next_seq = from_seq;
  if (!archived_) return batch;
  for (const v1::JobEvent& event : archived_->events) {
    if (event.seq() < from_seq) continue;
    batch.events.push_back(event);
    batch.next_seq = event.seq() + 1;
  }
  return batch;
}

absl::StatusOr<JobEventReader> JobManager::Events(const std::string& job_id) const {
  JobEventReader reader;
  reader.archived_ = FindArchived(job_id);
  if (!reader.archived_) reader.driver_ = Find(job_id);
  if (!reader.archived_ && !reader.driver_) return NoSuchJob(job_id);
  return reader;
}

std::vector<v1::JobStatus> JobManager::Statuses() const {
  std::vector<v1::JobStatus> out;
  std::vector<std::shared_ptr<JobDriver>> live;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : archived_) out.push_back(job->status);
    for (const auto& [id, driver] : jobs_) live.push_back(driver);
  }
  for (const auto& driver : live) out.push_back(driver->Status());
  std::stable_sort(out.begin(), out.end(), [](const v1::JobStatus& a, const v1::JobStatus& b) {
    return JobNumber(a.job_id()) < JobNumber(b.job_id());
  });
  return out;
}

absl::Status JobManager::Cancel(const std::string& job_id, const std::string& reason) {
  if (auto archived = FindArchived(job_id)) return AlreadyEnded(job_id, archived->status.state());
  auto driver = Find(job_id);
  if (!driver) return NoSuchJob(job_id);
  if (driver->Ended()) return AlreadyEnded(job_id, driver->Status().state());
  driver->Cancel(reason.empty() ? "cancelled by the user" : reason);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> JobManager::SetDrained(const std::string& host,
                                                                const std::string& job_id,
                                                                bool drained) {
  if (host.empty()) return absl::InvalidArgumentError("no host given");
  if (store_ != nullptr) HVDD_RETURN_IF_ERROR(store_->Writable());
  std::vector<std::shared_ptr<JobDriver>> targets;
  if (!job_id.empty()) {
    if (auto archived = FindArchived(job_id)) {
      return AlreadyEnded(job_id, archived->status.state());
    }
    auto driver = Find(job_id);
    if (!driver) return NoSuchJob(job_id);
    targets.push_back(driver);
  } else {
    for (auto& driver : List()) {
      if (!driver->Ended()) targets.push_back(driver);
    }
  }
  std::vector<std::string> ids;
  for (auto& driver : targets) {
    driver->SetDrained(host, drained);
    ids.push_back(driver->job_id());
  }
  return ids;
}

void JobManager::Shutdown(const std::string& reason, absl::Duration grace) {
  std::vector<std::shared_ptr<JobDriver>> jobs;
  {
    absl::MutexLock lock(&mu_);
    if (abandoned_) return;  // left running on purpose
    shutting_down_ = true;
    for (const auto& [id, driver] : jobs_) jobs.push_back(driver);
  }
  for (auto& job : jobs) job->Cancel(reason);
  // Drivers send SIGTERM, then SIGKILL after their own grace; wait for that
  // (the daemon's jobs run on the real clock).
  const Clock& clock = RealClock();
  const absl::Time deadline = clock.Now() + grace + absl::Seconds(10);
  for (auto& job : jobs) job->WaitEnded(std::max(deadline - clock.Now(), absl::ZeroDuration()));
}

}  // namespace horovodd::daemon
