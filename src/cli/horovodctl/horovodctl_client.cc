#include "cli/horovodctl/horovodctl_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace horovodd::cli {

JobClient::JobClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), stub_(v1::JobService::NewStub(std::move(channel))) {}

void JobClient::SetDeadline(grpc::ClientContext* context) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
}

absl::Status JobClient::ToStatus(const grpc::Status& status) const {
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    // The transport's codes: say which daemon, since its message rarely does.
    case grpc::StatusCode::UNAVAILABLE:
      return absl::Status(code, absl::StrCat("cannot reach horovodd at ", options_.address, ": ",
                                             status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::Status(code,
                          absl::StrCat("horovodd at ", options_.address, " did not answer within ",
                                       absl::FormatDuration(options_.rpc_timeout)));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::Status(
          code, absl::StrCat("horovodd at ", options_.address,
                             " does not support this request (an older version?)",
                             status.error_message().empty() ? "" : ": ", status.error_message()));
    // The daemon's message says which credential it wanted.
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::Status(code, absl::StrCat("horovodd at ", options_.address,
                                             " refused the request: ", status.error_message()));
    default:
      // The daemon's own answers (NOT_FOUND, INVALID_ARGUMENT, ...) already
      // name the job, host or field.
      return absl::Status(code, status.error_message());
  }
}

absl::StatusOr<std::vector<v1::JobStatus>> JobClient::ListJobs() {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::ListJobsResponse response;
  grpc::Status st = stub_->ListJobs(&context, v1::ListJobsRequest(), &response);
  if (!st.ok()) return ToStatus(st);
  return std::vector<v1::JobStatus>(response.jobs().begin(), response.jobs().end());
}

absl::StatusOr<v1::JobStatus> JobClient::GetJob(const std::string& job_id) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::JobStatus response;
  grpc::Status st = stub_->GetJob(&context, request, &response);
  if (!st.ok()) return ToStatus(st);
  return response;
}

absl::Status JobClient::CancelJob(const std::string& job_id, const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  v1::CancelJobResponse response;
  return ToStatus(stub_->CancelJob(&context, request, &response));
}

absl::StatusOr<v1::StopDaemonResponse> JobClient::StopDaemon(bool stop_jobs,
                                                             const std::string& reason) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::StopDaemonRequest request;
  request.set_stop_jobs(stop_jobs);
  request.set_reason(reason);
  v1::StopDaemonResponse response;
  grpc::Status st = stub_->StopDaemon(&context, request, &response);
  if (!st.ok()) return ToStatus(st);
  return response;
}

absl::StatusOr<std::vector<std::string>> JobClient::SetDrained(const std::string& host,
                                                               const std::string& job_id,
                                                               bool drained) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::DrainHostRequest request;
  request.set_host(host);
  request.set_job_id(job_id);
  v1::DrainHostResponse response;
  grpc::Status st = drained ? stub_->DrainHost(&context, request, &response)
                            : stub_->UndrainHost(&context, request, &response);
  if (!st.ok()) return ToStatus(st);
  return std::vector<std::string>(response.job_ids().begin(), response.job_ids().end());
}

absl::StatusOr<std::vector<v1::JobEvent>> JobClient::WorkerOutput(const std::string& job_id,
                                                                  int rank, int max_lines) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetWorkerOutputRequest request;
  request.set_job_id(job_id);
  request.set_rank(rank);
  request.set_max_lines(max_lines);
  v1::GetWorkerOutputResponse response;
  grpc::Status st = stub_->GetWorkerOutput(&context, request, &response);
  if (!st.ok()) return ToStatus(st);
  return std::vector<v1::JobEvent>(response.lines().begin(), response.lines().end());
}

absl::Status JobClient::Watch(const std::string& job_id, uint64_t from_seq,
                              const std::function<void(const v1::JobEvent&)>& on_event) {
  grpc::ClientContext context;
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  request.set_from_seq(from_seq);
  auto reader = stub_->WatchJob(&context, request);
  v1::JobEvent event;
  bool any = false;
  while (reader->Read(&event)) {
    any = true;
    on_event(event);
  }
  grpc::Status st = reader->Finish();
  if (any && st.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // It answered before: the daemon went away (or restarted) mid-stream.
    return absl::UnavailableError(absl::StrCat("lost horovodd at ", options_.address,
                                               " while watching ", job_id, ": ",
                                               st.error_message()));
  }
  return ToStatus(st);
}

}  // namespace horovodd::cli
