#include "daemon/job_limits.h"

#include "absl/strings/str_cat.h"
#include "daemon/grpc_status.h"

namespace horovodd::daemon {

absl::Status ApplyJobLimits(const DaemonLimits& limits, int unfinished_jobs, v1::JobSpec& spec) {
  if (unfinished_jobs >= limits.max_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this horovodd runs at most ", limits.max_jobs,
                     " unfinished jobs at once (limits.max_jobs) and has ", unfinished_jobs,
                     "; submit again when one has ended"));
  }
  const int most = limits.max_workers_per_job;
  for (const auto& [field, value] : {std::pair<const char*, int>{"num_proc", spec.num_proc()},
                                     std::pair<const char*, int>{"max_np", spec.max_np()}}) {
    if (value > most) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " ", value, " is over this horovodd's limit of ", most,
                       " workers per job (limits.max_workers_per_job)"));
    }
  }
  // Only an elastic job grows; a fixed-size one stays at num_proc.
  if (spec.elastic() && spec.max_np() == 0) spec.set_max_np(most);
  return absl::OkStatus();
}

grpc::Status LimitedJobService::SubmitJob(grpc::ServerContext* context,
                                          const v1::SubmitJobRequest* request,
                                          v1::SubmitJobResponse* response) {
  std::lock_guard<std::mutex> lock(submit_mu_);
  int unfinished = 0;
  for (const auto& job : jobs_->List()) unfinished += job->Ended() ? 0 : 1;
  v1::SubmitJobRequest limited = *request;
  if (auto st = ApplyJobLimits(limits_, unfinished, *limited.mutable_spec()); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return inner_->SubmitJob(context, &limited, response);
}

grpc::Status LimitedJobService::GetJob(grpc::ServerContext* context,
                                       const v1::GetJobRequest* request, v1::JobStatus* response) {
  return inner_->GetJob(context, request, response);
}

grpc::Status LimitedJobService::ListJobs(grpc::ServerContext* context,
                                         const v1::ListJobsRequest* request,
                                         v1::ListJobsResponse* response) {
  return inner_->ListJobs(context, request, response);
}

grpc::Status LimitedJobService::WatchJob(grpc::ServerContext* context,
                                         const v1::WatchJobRequest* request,
                                         grpc::ServerWriter<v1::JobEvent>* writer) {
  return inner_->WatchJob(context, request, writer);
}

grpc::Status LimitedJobService::CancelJob(grpc::ServerContext* context,
                                          const v1::CancelJobRequest* request,
                                          v1::CancelJobResponse* response) {
  return inner_->CancelJob(context, request, response);
}

grpc::Status LimitedJobService::DrainHost(grpc::ServerContext* context,
                                          const v1::DrainHostRequest* request,
                                          v1::DrainHostResponse* response) {
  return inner_->DrainHost(context, request, response);
}

grpc::Status LimitedJobService::UndrainHost(grpc::ServerContext* context,
                                            const v1::DrainHostRequest* request,
                                            v1::DrainHostResponse* response) {
  return inner_->UndrainHost(context, request, response);
}

grpc::Status LimitedJobService::GetWorkerOutput(grpc::ServerContext* context,
                                                const v1::GetWorkerOutputRequest* request,
                                                v1::GetWorkerOutputResponse* response) {
  return inner_->GetWorkerOutput(context, request, response);
}

}  // namespace horovodd::daemon
