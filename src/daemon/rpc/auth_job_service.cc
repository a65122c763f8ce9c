#include "daemon/rpc/auth_job_service.h"

#include "daemon/rpc/grpc_status.h"

namespace horovodd::daemon {

// Checks the caller, then runs `call` on the inner service.
#define HVDD_AUTHORIZED(access, method, call)                                       \
  do {                                                                              \
    if (absl::Status st = policy_->Authorize(*context, method, access); !st.ok()) { \
      return ToGrpcStatus(st);                                                      \
    }                                                                               \
    return call;                                                                    \
  } while (false)

grpc::Status AuthorizingJobService::SubmitJob(grpc::ServerContext* context,
                                              const v1::SubmitJobRequest* request,
                                              v1::SubmitJobResponse* response) {
  HVDD_AUTHORIZED(Access::kAdmin, "SubmitJob", inner_->SubmitJob(context, request, response));
}

grpc::Status AuthorizingJobService::GetJob(grpc::ServerContext* context,
                                           const v1::GetJobRequest* request,
                                           v1::JobStatus* response) {
  HVDD_AUTHORIZED(Access::kRead, "GetJob", inner_->GetJob(context, request, response));
}

grpc::Status AuthorizingJobService::ListJobs(grpc::ServerContext* context,
                                             const v1::ListJobsRequest* request,
                                             v1::ListJobsResponse* response) {
  HVDD_AUTHORIZED(Access::kRead, "ListJobs", inner_->ListJobs(context, request, response));
}

grpc::Status AuthorizingJobService::WatchJob(grpc::ServerContext* context,
                                             const v1::WatchJobRequest* request,
                                             grpc::ServerWriter<v1::JobEvent>* writer) {
  HVDD_AUTHORIZED(Access::kRead, "WatchJob", inner_->WatchJob(context, request, writer));
}

grpc::Status AuthorizingJobService::CancelJob(grpc::ServerContext* context,
                                              const v1::CancelJobRequest* request,
                                              v1::CancelJobResponse* response) {
  HVDD_AUTHORIZED(Access::kAdmin, "CancelJob", inner_->CancelJob(context, request, response));
}

grpc::Status AuthorizingJobService::DrainHost(grpc::ServerContext* context,
                                              const v1::DrainHostRequest* request,
                                              v1::DrainHostResponse* response) {
  HVDD_AUTHORIZED(Access::kAdmin, "DrainHost", inner_->DrainHost(context, request, response));
}

grpc::Status AuthorizingJobService::UndrainHost(grpc::ServerContext* context,
                                                const v1::DrainHostRequest* request,
                                                v1::DrainHostResponse* response) {
  HVDD_AUTHORIZED(Access::kAdmin, "UndrainHost", inner_->UndrainHost(context, request, response));
}

grpc::Status AuthorizingJobService::GetWorkerOutput(grpc::ServerContext* context,
                                                    const v1::GetWorkerOutputRequest* request,
                                                    v1::GetWorkerOutputResponse* response) {
  HVDD_AUTHORIZED(Access::kRead, "GetWorkerOutput",
                  inner_->GetWorkerOutput(context, request, response));
}

#undef HVDD_AUTHORIZED

}  // namespace horovodd::daemon
