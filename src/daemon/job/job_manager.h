// The daemon's jobs: submission, lookup, cancel, shutdown. Thread-safe; each
// job runs on its own driver loop, so one job's churn never stalls another.
// Besides its live jobs it holds the archived ones an earlier run of the
// daemon recorded (see Journal): read-only, listed and watched like the rest.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/job/job_driver.h"
#include "daemon/journal/journal.h"
#include "daemon/launch/launcher.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class JobManager {
 public:
  // `launcher` and `observer` (may be null) outlive the manager.
  explicit JobManager(Launcher* launcher, JobObserver* observer = nullptr)
      : launcher_(launcher), observer_(observer) {}
  ~JobManager();

  // The address workers dial; set once the server is listening.
  void set_worker_address(std::string address) { worker_address_ = std::move(address); }
  // Variables the daemon sets for every worker of every job (how to reach it
  // over TLS); set before serving.
  void set_worker_environment(std::map<std::string, std::string> env) {
    worker_env_ = std::move(env);
  }
  // What each new job's key-value namespace may hold; set before serving.
  void set_kv_limits(KvLimits limits) { kv_limits_ = limits; }
  // Jobs write checkpoints for a restarted daemon (JobContext::checkpoints).
  void set_checkpoints(bool on) { checkpoints_ = on; }

  // Jobs an earlier run recorded; call before serving. New job numbers
  // continue after the highest archived one, so no id is ever reused.
  void AddArchived(std::vector<ArchivedJob> jobs);

  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec);
  // A job an earlier run of the daemon was running, to be taken back
  // (JobDriver::Resume next): its old id and worker token, so its workers
  // get back in. Not a submission: observers are not told of it.
  std::shared_ptr<JobDriver> Readmit(const std::string& job_id, const v1::JobSpec& spec,
                                     std::string worker_token);
  // The daemon goes and leaves its jobs running for the next one: refuses
  // new jobs and stops every driver (JobDriver::Abandon) without ending it.
  void Abandon();
  // A live job's driver; nullptr if unknown or archived.
  std::shared_ptr<JobDriver> Find(const std::string& job_id) const;
  // An archived job; nullptr if unknown or live.
  std::shared_ptr<const ArchivedJob> FindArchived(const std::string& job_id) const;
  // Whether `token` is the worker token of a live job (compared in constant
  // time), so a worker token used elsewhere is told apart from a wrong one.
  bool IsWorkerToken(absl::string_view token) const;
  // Live jobs only.
  std::vector<std::shared_ptr<JobDriver>> List() const;
  // The status of a live or archived job; NOT_FOUND if neither.
  absl::StatusOr<v1::JobStatus> Status(const std::string& job_id) const;
  // Every job, archived and live, in submission order.
  std::vector<v1::JobStatus> Statuses() const;
  // FAILED_PRECONDITION for a job that already ended.
  absl::Status Cancel(const std::string& job_id, const std::string& reason);
  // Drains (or undrains) `host` in job `job_id`, or in every running job when
  // job_id is empty. Returns the jobs it applied to. FAILED_PRECONDITION for
  // an archived job.
  absl::StatusOr<std::vector<std::string>> SetDrained(const std::string& host,
                                                      const std::string& job_id, bool drained);
  // Refuses new jobs, cancels running ones with `reason`, and waits (up to
  // `grace` plus the kill time) until their workers are gone.
  void Shutdown(const std::string& reason, absl::Duration grace);

  // Ended jobs (live and archived together) kept in memory; past it the
  // oldest are forgotten at the next submit (the journal keeps as many).
  static constexpr size_t kMaxEndedJobs = 1000;

 private:
  // Removes the oldest ended jobs beyond kMaxEndedJobs; returns the drivers
  // so that they are destroyed (their loops joined) outside mu_.
  std::vector<std::shared_ptr<JobDriver>> ForgetOldEndedLocked();

  Launcher* const launcher_;
  JobObserver* const observer_;
  std::string worker_address_;
  std::map<std::string, std::string> worker_env_;
  KvLimits kv_limits_;
  bool checkpoints_ = false;
  mutable std::mutex mu_;
  bool shutting_down_ = false;                                 // guarded by mu_
  bool abandoned_ = false;                                     // guarded by mu_
  int64_t next_job_number_ = 1;                                // guarded by mu_
  std::map<std::string, std::shared_ptr<JobDriver>> jobs_;     // guarded by mu_
  std::map<std::string, std::shared_ptr<const ArchivedJob>> archived_;  // guarded by mu_
};

}  // namespace horovodd::daemon
