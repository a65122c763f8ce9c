// gRPC adapter for JobService (horovodrun, horovodctl). Synchronous handlers:
// client calls are few, and a watch holds one thread while it streams.
#pragma once

#include <functional>

#include "daemon/job/job_manager.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // What StopDaemon does: accepts the stop (the daemon stops after the answer) or says why
  // not. Unset: this daemon cannot be stopped over RPC (horovodrun's embedded one).
  using StopHandler =
      std::function<absl::Status(const v1::StopDaemonRequest&, v1::StopDaemonResponse*)>;

  explicit JobServiceImpl(JobManager* jobs, StopHandler stop = nullptr)
      : jobs_(jobs), stop_(std::move(stop)) {}

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::JobStatus* response) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  grpc::Status DrainHost(grpc::ServerContext*, const v1::DrainHostRequest* request,
                         v1::DrainHostResponse* response) override;
  grpc::Status UndrainHost(grpc::ServerContext*, const v1::DrainHostRequest* request,
                           v1::DrainHostResponse* response) override;
  grpc::Status GetWorkerOutput(grpc::ServerContext*, const v1::GetWorkerOutputRequest* request,
                               v1::GetWorkerOutputResponse* response) override;
  grpc::Status StopDaemon(grpc::ServerContext*, const v1::StopDaemonRequest* request,
                          v1::StopDaemonResponse* response) override;

 private:
  JobManager* const jobs_;
  const StopHandler stop_;
};

}  // namespace horovodd::daemon
