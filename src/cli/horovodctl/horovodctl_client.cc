#include "cli/horovodctl/horovodctl_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "cli/leader_follower/job_watch.h"
#include "common/status_macros.h"

namespace horovodd::cli {

JobClient::JobClient(ClientOptions options, LeaderFollower* daemons)
    : options_(std::move(options)), daemons_(daemons) {}

absl::Status JobClient::Call(
    const std::function<grpc::Status(v1::JobService::Stub&, grpc::ClientContext&)>& call) {
  return ToStatus(
      daemons_->Run([&](const std::string&, const std::shared_ptr<grpc::Channel>& channel,
                        grpc::ClientContext& context) {
        context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
        auto stub = v1::JobService::NewStub(channel);
        return call(*stub, context);
      }));
}

absl::Status JobClient::ToStatus(const FollowResult& result) const {
  // Several daemons tried, none took the call: the follower's list says why.
  if (!result.gave_up.empty()) return absl::UnavailableError(result.gave_up);
  const absl::Status& status = result.status;
  const std::string& address = result.address;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return absl::OkStatus();
    // The transport's codes: say which daemon, since its message rarely does.
    case absl::StatusCode::kUnavailable:
      return absl::Status(status.code(), absl::StrCat("cannot reach horovodd at ", address, ": ",
                                                      status.message()));
    case absl::StatusCode::kDeadlineExceeded:
      return absl::Status(status.code(),
                          absl::StrCat("horovodd at ", address, " did not answer within ",
                                       absl::FormatDuration(options_.rpc_timeout)));
    case absl::StatusCode::kUnimplemented:
      return absl::Status(status.code(),
                          absl::StrCat("horovodd at ", address,
                                       " does not support this request (an older version?)",
                                       status.message().empty() ? "" : ": ", status.message()));
    // The daemon's message says which credential it wanted.
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return absl::Status(status.code(), absl::StrCat("horovodd at ", address,
                                                      " refused the request: ", status.message()));
    default:
      // The daemon's own answers (NOT_FOUND, INVALID_ARGUMENT, ...) already
      // name the job, host or field.
      return status;
  }
}

absl::StatusOr<std::vector<v1::JobStatus>> JobClient::ListJobs() {
  v1::ListJobsResponse response;
  HVDD_RETURN_IF_ERROR(Call([&](v1::JobService::Stub& stub, grpc::ClientContext& context) {
    return stub.ListJobs(&context, v1::ListJobsRequest(), &response);
  }));
  return std::vector<v1::JobStatus>(response.jobs().begin(), response.jobs().end());
}

absl::StatusOr<v1::JobStatus> JobClient::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::JobStatus response;
  HVDD_RETURN_IF_ERROR(Call([&](v1::JobService::Stub& stub, grpc::ClientContext& context) {
    return stub.GetJob(&context, request, &response);
  }));
  return response;
}

absl::Status JobClient::CancelJob(const std::string& job_id, const std::string& reason) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  v1::CancelJobResponse response;
  return Call([&](v1::JobService::Stub& stub, grpc::ClientContext& context) {
    return stub.CancelJob(&context, request, &response);
  });
}

absl::StatusOr<v1::StopDaemonResponse> JobClient::StopDaemon(bool stop_jobs,
                                                             const std::string& reason) {
  v1::StopDaemonRequest request;
  request.set_stop_jobs(stop_jobs);
  request.set_reason(reason);
  v1::StopDaemonResponse response;
  HVDD_RETURN_IF_ERROR(Call([&](v1::JobService::Stub& stub, grpc::ClientContext& context) {
    return stub.StopDaemon(&context, request, &response);
  }));
  return response;
}

absl::StatusOr<std::vector<std::string>> JobClient::SetDrained(const std::string& host,
                                                               const std::string& job_id,
                                                               bool drained) {
  v1::DrainHostRequest request;
  request.set_host(host);
  request.set_job_id(job_id);
  v1::DrainHostResponse response;
  HVDD_RETURN_IF_ERROR(Call([&](v1::JobService::Stub& stub, grpc::ClientContext& context) {
    return drained ? stub.DrainHost(&context, request, &response)
                   : stub.UndrainHost(&context, request, &response);
  }));
  return std::vector<std::string>(response.job_ids().begin(), response.job_ids().end());
}

absl::StatusOr<std::vector<v1::JobEvent>> JobClient::WorkerOutput(const std::string& job_id,
                                                                  int rank, int max_lines) {
  v1::GetWorkerOutputRequest request;
  request.set_job_id(job_id);
  request.set_rank(rank);
  request.set_max_lines(max_lines);
  v1::GetWorkerOutputResponse response;
  HVDD_RETURN_IF_ERROR(Call([&](v1::JobService::Stub& stub, grpc::ClientContext& context) {
    return stub.GetWorkerOutput(&context, request, &response);
  }));
  return std::vector<v1::JobEvent>(response.lines().begin(), response.lines().end());
}

absl::Status JobClient::Watch(const std::string& job_id, uint64_t from_seq,
                              const std::function<void(const v1::JobEvent&)>& on_event) {
  // A stream that ends without the job's end is for the caller to judge.
  WatchOutcome outcome = WatchJobEvents(*daemons_, job_id, from_seq, on_event);
  if (outcome.ended) return absl::OkStatus();
  return outcome.status;
}

}  // namespace horovodd::cli
