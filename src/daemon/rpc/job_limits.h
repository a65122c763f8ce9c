// The daemon's limits on what clients may ask (DaemonLimits, config key
// `limits`), so that no client can exhaust it, and the JobService that checks
// them with every request's validation (request_validation.h).
#pragma once

#include <mutex>

#include "absl/status/status.h"
#include "daemon/config/daemon_config.h"
#include "daemon/job/job_manager.h"
#include "daemon/job/kv_namespace.h"
#include "daemon/rpc/client_stream_limiter.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

// Refuses one more job when `unfinished_jobs` jobs have not ended
// (limits.max_jobs), and caps the max_np of an elastic job that has none at
// limits.max_workers_per_job. What depends on the spec alone (its size, its
// worker counts) is ValidateRequest's (request_validation.h).
absl::Status ApplyJobLimits(const DaemonLimits& limits, int unfinished_jobs, v1::JobSpec& spec);

// What each job's key-value namespace may hold under `limits`.
KvLimits KvLimitsOf(const DaemonLimits& limits);

// JobService that validates every request (ValidateRequest), refuses what
// goes past the limits, and hands the rest to `inner`, which does the work.
class LimitedJobService final : public v1::JobService::Service {
 public:
  // `inner` and `jobs` outlive this service.
  LimitedJobService(v1::JobService::Service* inner, const JobManager* jobs, DaemonLimits limits)
      : inner_(inner),
        jobs_(jobs),
        limits_(limits),
        watch_streams_("WatchJob", "limits.max_watch_streams_per_client",
                       limits.max_watch_streams_per_client) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::JobStatus* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  grpc::Status DrainHost(grpc::ServerContext* context, const v1::DrainHostRequest* request,
                         v1::DrainHostResponse* response) override;
  grpc::Status UndrainHost(grpc::ServerContext* context, const v1::DrainHostRequest* request,
                           v1::DrainHostResponse* response) override;
  grpc::Status GetWorkerOutput(grpc::ServerContext* context,
                               const v1::GetWorkerOutputRequest* request,
                               v1::GetWorkerOutputResponse* response) override;

 private:
  v1::JobService::Service* const inner_;
  const JobManager* const jobs_;
  const DaemonLimits limits_;
  // Each open WatchJob holds one of the server's threads.
  ClientStreamLimiter watch_streams_;
  // Held across the count and the submit, so concurrent submissions cannot
  // together go past max_jobs.
  std::mutex submit_mu_;
};

}  // namespace horovodd::daemon
