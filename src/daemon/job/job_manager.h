// The daemon's jobs: submission, lookup, cancel, shutdown. Thread-safe; each
// job runs on its own driver loop, so one job's churn never stalls another.
// Besides its live jobs it holds the archived ones an earlier run of the
// daemon recorded (see Journal): read-only, listed and watched like the rest.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/job/job_driver.h"
#include "daemon/journal/journal.h"
#include "daemon/launch/launcher.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// A live or archived job's events, as WatchJob streams them and the status
// page shows them (JobManager::Events). It holds the job, so it reads on
// after the manager has forgotten it. Thread-safe.
class JobEventReader {
 public:
  // Events with seq >= from_seq. A live job's come as its EventLog::WaitFrom
  // gives them (waiting until `deadline` for one); an archived job's
  // recorded ones all at once, closed.
  EventLog::Batch From(uint64_t from_seq, absl::Time deadline) const;

 private:
  friend class JobManager;
  std::shared_ptr<const ArchivedJob> archived_;  // one of the two is set
  std::shared_ptr<JobDriver> driver_;
};

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
  // Submits and drains are refused while `store` cannot take records
  // (Journal::Writable: etcd without quorum); set before serving, outlives
  // the manager.
  void set_store(Journal* store) { store_ = store; }
  // Every job's drivers hold their decisions while `gate` is not open
  // (JobContext::gate); null (no election): never held. Set before serving.
  void set_decision_gate(std::shared_ptr<DecisionGate> gate) { gate_ = std::move(gate); }

  // Jobs an earlier run recorded; call before serving. New job numbers
  // continue after the highest archived one, so no id is ever reused.
  void AddArchived(std::vector<ArchivedJob> jobs) ABSL_LOCKS_EXCLUDED(mu_);

  // A new job, or, when `client_request_id` (SubmitJobRequest's, already
  // validated) names a job this manager knows (live, taken back or
  // archived), that job's id: a client retrying a submission whose answer it
  // lost gets the job it made, not a second one. ALREADY_EXISTS when that
  // job's spec differs from `spec` (the id was reused for another job).
  absl::StatusOr<std::string> Submit(const v1::JobSpec& spec,
                                     const std::string& client_request_id = "")
      ABSL_LOCKS_EXCLUDED(mu_);
  // The job submitted with `client_request_id`, if this manager knows it; "" if not.
  std::string JobOfRequest(const std::string& client_request_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // A job an earlier run of the daemon was running, to be taken back
  // (JobDriver::Resume next): its old id and worker token, so its workers
  // get back in, and its submission's client request id. Not a submission:
  // observers are not told of it.
  std::shared_ptr<JobDriver> Readmit(const std::string& job_id, const v1::JobSpec& spec,
                                     std::string worker_token,
                                     const std::string& client_request_id = "")
      ABSL_LOCKS_EXCLUDED(mu_);
  // The daemon goes and leaves its jobs running for the next one: refuses
  // new jobs and stops every driver (JobDriver::Abandon) without ending it.
  void Abandon() ABSL_LOCKS_EXCLUDED(mu_);
  // A live job's driver; nullptr if unknown or archived.
  std::shared_ptr<JobDriver> Find(const std::string& job_id) const ABSL_LOCKS_EXCLUDED(mu_);
  // An archived job; nullptr if unknown or live.
  std::shared_ptr<const ArchivedJob> FindArchived(const std::string& job_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `token` is the worker token of a live job (compared in constant
  // time), so a worker token used elsewhere is told apart from a wrong one.
  bool IsWorkerToken(absl::string_view token) const ABSL_LOCKS_EXCLUDED(mu_);
  // Live jobs only.
  std::vector<std::shared_ptr<JobDriver>> List() const ABSL_LOCKS_EXCLUDED(mu_);
  // The status of a live or archived job; NOT_FOUND if neither.
  absl::StatusOr<v1::JobStatus> Status(const std::string& job_id) const;
  // Every job, archived and live, in submission order.
  std::vector<v1::JobStatus> Statuses() const ABSL_LOCKS_EXCLUDED(mu_);
  // The job's events, live or archived; NOT_FOUND if neither.
  absl::StatusOr<JobEventReader> Events(const std::string& job_id) const;
  // FAILED_PRECONDITION for a job that already ended.
  absl::Status Cancel(const std::string& job_id, const std::string& reason);
  // Drains (or undrains) `host` in job `job_id`, or in every running job when
  // job_id is empty. Returns the jobs it applied to. FAILED_PRECONDITION for
  // an archived job.
  absl::StatusOr<std::vector<std::string>> SetDrained(const std::string& host,
                                                      const std::string& job_id, bool drained);
  // Refuses new jobs, cancels running ones with `reason`, and waits (up to
  // `grace` plus the kill time) until their workers are gone.
  void Shutdown(const std::string& reason, absl::Duration grace) ABSL_LOCKS_EXCLUDED(mu_);

  // Ended jobs (live and archived together) kept in memory; past it the
  // oldest are forgotten at the next submit (the journal keeps as many).
  static constexpr size_t kMaxEndedJobs = 1000;

 private:
  // Removes the oldest ended jobs beyond kMaxEndedJobs; returns the drivers
  // so that they are destroyed (their loops joined) outside mu_.
  std::vector<std::shared_ptr<JobDriver>> ForgetOldEndedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For a submission with `client_request_id`: the id of the job an earlier
  // one with that id made, "" if none (or no id); ALREADY_EXISTS when that
  // job's spec is not `spec`.
  absl::StatusOr<std::string> RepeatedLocked(const std::string& client_request_id,
                                             const v1::JobSpec& spec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Launcher* const launcher_;
  JobObserver* const observer_;
  std::string worker_address_;
  std::map<std::string, std::string> worker_env_;
  KvLimits kv_limits_;
  bool checkpoints_ = false;
  Journal* store_ = nullptr;
  std::shared_ptr<DecisionGate> gate_;
  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_job_number_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::shared_ptr<JobDriver>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const ArchivedJob>> archived_ ABSL_GUARDED_BY(mu_);
  // Client request id -> job id, for the jobs of jobs_ and archived_ that
  // were submitted with one; forgotten with the job.
  std::map<std::string, std::string> job_of_request_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::daemon
