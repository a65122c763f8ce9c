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

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                              absl::Time created) {}
  // Every event of the job, worker OUTPUT included, after it was stamped.
  virtual void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) {}
  // Once, just before its JOB_ENDED event: the job's status as it ended
  // (its workers, hosts and resets, which events do not carry).
  virtual void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) {}
};

// Fans out to several observers; add them before any job starts.
class ObserverList final : public JobObserver {
 public:
  void Add(JobObserver* observer) { observers_.push_back(observer); }
  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec,
                      absl::Time created) override {
    for (auto* o : observers_) o->OnJobSubmitted(job_id, spec, created);
  }
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override {
    for (auto* o : observers_) o->OnJobEvent(job_id, event);
  }
  void OnJobFinalStatus(const std::string& job_id, const v1::JobStatus& status) override {
    for (auto* o : observers_) o->OnJobFinalStatus(job_id, status);
  }

 private:
  std::vector<JobObserver*> observers_;
};

}  // namespace horovodd::daemon
