// The daemon's limits on what clients may submit (DaemonLimits, config key
// `limits`), so that no client can exhaust it.
#pragma once

#include <mutex>

#include "absl/status/status.h"
#include "daemon/daemon_config.h"
#include "daemon/job_manager.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

// Checks `spec` against `limits` when `unfinished_jobs` jobs have not ended,
// and caps the max_np of an elastic job that has none. The messages name the
// limit's config key.
absl::Status ApplyJobLimits(const DaemonLimits& limits, int unfinished_jobs, v1::JobSpec& spec);

// JobService with the limits checked before a job is submitted; every call
// is handed to `inner`, which does the work.
class LimitedJobService final : public v1::JobService::Service {
 public:
  // `inner` and `jobs` outlive this service.
  LimitedJobService(v1::JobService::Service* inner, const JobManager* jobs, DaemonLimits limits)
      : inner_(inner), jobs_(jobs), limits_(limits) {}

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
  // Held across the count and the submit, so concurrent submissions cannot
  // together go past max_jobs.
  std::mutex submit_mu_;
};

}  // namespace horovodd::daemon
