// Daemon-wide listeners of every job: the journal (records that survive a
// restart) and the metrics. They see each submission and every event, from
// whichever thread produced it, so they must be thread-safe and quick.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

// What a restarted daemon needs to take a running job back (Journal keeps
// the newest one of each job): its status (workers with pid, host, rank and
// state; hosts; resets; last commit; the ready generation) and the newest
// generation it had planned.
// A host's failure history (Horovod's blacklist back-off, LO * 2^cooldowns),
// so that a restarted daemon benches it as long as this one would have.
struct HostCooldown {
  std::string host;
  int failures = 0;
  int cooldowns = 0;  // times it was blacklisted: the back-off's n
  std::string last_failure;
  // When its cooldown ends: absl::InfinitePast() if none runs,
  // absl::InfiniteFuture() if it is blacklisted for good.
  absl::Time until = absl::InfinitePast();
};

struct JobCheckpoint {
  v1::JobStatus status;
  // Hosts that failed at least once.
  std::vector<HostCooldown> host_cooldowns;
  int64_t planned_generation = 0;
  std::vector<int64_t> planned_members;  // of planned_generation, in rank order
  // Filled in by the journal when it reads the checkpoint back: the newest
  // event it recorded, so the job's events number on after it.
  uint64_t last_event_seq = 0;
};

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  // `client_request_id`: the submission's SubmitJobRequest.client_request_id
  // ("" for none), which the journal keeps with the job.
  virtual void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                              absl::Time created, const std::string& client_request_id) {}
  // Every event of the job, worker OUTPUT included, after it was stamped.
  virtual void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {}
  // Once, just before its JOB_ENDED event: the job's status as it ended
  // (its workers, hosts and resets, which events do not carry).
  virtual void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) {}
  // After each change a restart must not lose (a worker started or ended, a
  // generation planned or formed, a commit), from the job's loop.
  virtual void OnJobCheckpoint(const std::string& job_id, const JobCheckpoint& checkpoint) {}
};

// Fans out to several observers; add them before any job starts.
class ObserverList final : public JobObserver {
 public:
  void Add(JobObserver* observer) { observers_.push_back(observer); }
  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec, absl::Time created,
                      const std::string& client_request_id) override {
    for (auto* o : observers_) o->OnJobSubmitted(job_id, spec, created, client_request_id);
  }
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override {
    for (auto* o : observers_) o->OnJobEvent(job_id, event);
  }
  void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) override {
    for (auto* o : observers_) o->OnJobFinalStatus(job_id, status);
  }
  void OnJobCheckpoint(const std::string& job_id, const JobCheckpoint& checkpoint) override {
    for (auto* o : observers_) o->OnJobCheckpoint(job_id, checkpoint);
  }

 private:
  std::vector<JobObserver*> observers_;
};

}  // namespace horovodd::daemon
