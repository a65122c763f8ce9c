// JobService with the caller's credentials checked first (see AccessPolicy):
// submit, cancel, drain and undrain need the admin token; the rest read.
// Every call that passes is handed to `inner`, which does the work, so an
// unauthenticated client never reaches request validation or the limits.
#pragma once

#include "daemon/auth/auth_policy.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class AuthorizingJobService final : public v1::JobService::Service {
 public:
  // `inner` and `policy` outlive this service.
  AuthorizingJobService(v1::JobService::Service* inner, AccessPolicy* policy)
      : inner_(inner), policy_(policy) {}

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
  AccessPolicy* const policy_;
};

}  // namespace horovodd::daemon
