#include "daemon/rpc/job_limits.h"

#include "absl/strings/str_cat.h"
#include "daemon/rpc/grpc_status.h"
#include "daemon/validation/request_validation.h"

namespace horovodd::daemon {
namespace {

// Validates `request`; on success runs `call`.
template <typename Request, typename Call>
grpc::Status Checked(const Request& request, const DaemonLimits& limits, Call call) {
  if (absl::Status st = ValidateRequest(request, limits); !st.ok()) return ToGrpcStatus(st);
  return call();
}

}  // namespace

absl::Status ApplyJobLimits(const DaemonLimits& limits, int unfinished_jobs, v1::JobSpec& spec) {
  if (unfinished_jobs >= limits.max_jobs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this horovodd runs at most ", limits.max_jobs,
                     " unfinished jobs at once (limits.max_jobs) and has ", unfinished_jobs,
                     "; submit again when one has ended"));
  }
  // Only an elastic job grows; a fixed-size one stays at num_proc.
  if (spec.elastic() && spec.max_np() == 0) spec.set_max_np(limits.max_workers_per_job);
  return absl::OkStatus();
}

KvLimits KvLimitsOf(const DaemonLimits& limits) {
  KvLimits kv;
  kv.max_key_bytes = static_cast<size_t>(limits.max_kv_key_bytes);
  kv.max_value_bytes = static_cast<size_t>(limits.max_kv_value_bytes);
  kv.max_keys = static_cast<size_t>(limits.max_kv_keys_per_job);
  kv.max_bytes = static_cast<size_t>(limits.max_kv_bytes_per_job);
  kv.max_waiters = static_cast<size_t>(limits.max_kv_waiters_per_job);
  return kv;
}

grpc::Status LimitedJobService::SubmitJob(grpc::ServerContext* context,
                                          const v1::SubmitJobRequest* request,
                                          v1::SubmitJobResponse* response) {
  // Malformed or oversized specs are refused before anything is counted.
  if (absl::Status st = ValidateRequest(*request, limits_); !st.ok()) return ToGrpcStatus(st);
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
  return Checked(*request, limits_, [&] { return inner_->GetJob(context, request, response); });
}

grpc::Status LimitedJobService::ListJobs(grpc::ServerContext* context,
                                         const v1::ListJobsRequest* request,
                                         v1::ListJobsResponse* response) {
  return Checked(*request, limits_, [&] { return inner_->ListJobs(context, request, response); });
}

grpc::Status LimitedJobService::WatchJob(grpc::ServerContext* context,
                                         const v1::WatchJobRequest* request,
                                         grpc::ServerWriter<v1::JobEvent>* writer) {
  return Checked(*request, limits_, [&] {
    // Held until the stream ends.
    auto slot = watch_streams_.Acquire(context->peer());
    if (!slot.ok()) return ToGrpcStatus(slot.status());
    return inner_->WatchJob(context, request, writer);
  });
}

grpc::Status LimitedJobService::CancelJob(grpc::ServerContext* context,
                                          const v1::CancelJobRequest* request,
                                          v1::CancelJobResponse* response) {
  return Checked(*request, limits_, [&] { return inner_->CancelJob(context, request, response); });
}

grpc::Status LimitedJobService::DrainHost(grpc::ServerContext* context,
                                          const v1::DrainHostRequest* request,
                                          v1::DrainHostResponse* response) {
  return Checked(*request, limits_, [&] { return inner_->DrainHost(context, request, response); });
}

grpc::Status LimitedJobService::UndrainHost(grpc::ServerContext* context,
                                            const v1::DrainHostRequest* request,
                                            v1::DrainHostResponse* response) {
  return Checked(*request, limits_,
                 [&] { return inner_->UndrainHost(context, request, response); });
}

grpc::Status LimitedJobService::GetWorkerOutput(grpc::ServerContext* context,
                                                const v1::GetWorkerOutputRequest* request,
                                                v1::GetWorkerOutputResponse* response) {
  return Checked(*request, limits_,
                 [&] { return inner_->GetWorkerOutput(context, request, response); });
}

}  // namespace horovodd::daemon
