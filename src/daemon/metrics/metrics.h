// The daemon's metrics, counted from job events (it is a JobObserver) and
// from gRPC calls, rendered in the Prometheus text format for GET /metrics.
// Thread-safe: drivers, gRPC threads and the HTTP thread all call in.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/job_events/job_observer.h"
#include "horovodd.pb.h"

namespace horovodd::daemon {

class Metrics final : public JobObserver {
 public:
  // Upper bounds (seconds) of the reset latency histogram's buckets.
  static constexpr std::array<double, 11> kResetLatencyBuckets = {0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                                                  5,    10,  30,   60,  120};
  // Distinct method labels; calls to any further name count as "other", so
  // clients calling made-up methods cannot grow the page without bound.
  static constexpr size_t kMaxRpcMethods = 64;

  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec, absl::Time created,
                      const std::string& client_request_id) override;
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override;

  // A job an earlier run of the daemon recorded; it counts in `state`.
  void AddRecoveredJob(const std::string& job_id, v1::JobState state);
  // One gRPC call began; `method` as gRPC names it ("/horovodd.v1.JobService/GetJob").
  void CountRpc(const std::string& method);

  // Every metric, in the Prometheus text exposition format (version 0.0.4).
  std::string Render() const;
  // Per rank of each job in `jobs` that has not ended, from what its
  // workers last reported (WorkerStatus.activity): how long it has waited
  // in its current collective, its step time, the collectives it completed
  // in this generation and its last commit. Same format; the caller takes
  // the statuses (Render is fed by events, these by each job's driver).
  static std::string RenderRanks(const std::vector<v1::JobStatus>& jobs);
  // Per job in `jobs` that has not ended, where its wall time went
  // (JobStatus.goodput): the seconds of each part, and its goodput ratio.
  static std::string RenderGoodput(const std::vector<v1::JobStatus>& jobs);
  // The ready hot spares of each job in `jobs` that has not ended and keeps spares.
  static std::string RenderSpares(const std::vector<v1::JobStatus>& jobs);

 private:
  struct Job {
    v1::JobState state = v1::PENDING;
    int workers = 0;  // size of its newest ready generation while it runs
  };
  void SetState(Job& job, v1::JobState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t resets_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t discovery_failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t worker_failures_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t spare_swaps_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<uint64_t, kResetLatencyBuckets.size()> reset_buckets_ ABSL_GUARDED_BY(mu_) = {};
  uint64_t reset_count_ ABSL_GUARDED_BY(mu_) = 0;
  double reset_seconds_sum_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> rpcs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::daemon
