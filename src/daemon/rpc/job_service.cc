#include "daemon/rpc/job_service.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/rpc/grpc_status.h"

namespace horovodd::daemon {
namespace {

grpc::Status NoSuchJob(const std::string& id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job '", id, "'"));
}

}  // namespace

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* request,
                                       v1::SubmitJobResponse* response) {
  HVDD_ASSIGN_OR_RETURN(std::string id,
                        jobs_->Submit(request->spec(), request->client_request_id()),
                        ToGrpcStatus(_));
  response->set_job_id(std::move(id));
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                                    v1::JobStatus* response) {
  HVDD_ASSIGN_OR_RETURN(*response, jobs_->Status(request->job_id()), ToGrpcStatus(_));
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                                      v1::ListJobsResponse* response) {
  for (auto& status : jobs_->Statuses()) *response->add_jobs() = std::move(status);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* context,
                                      const v1::WatchJobRequest* request,
                                      grpc::ServerWriter<v1::JobEvent>* writer) {
  HVDD_ASSIGN_OR_RETURN(JobEventReader events, jobs_->Events(request->job_id()), ToGrpcStatus(_));
  uint64_t next = request->from_seq();
  while (!context->IsCancelled()) {
    // Wake up now and then to notice a client that went away. (An archived
    // job's recorded events come in one batch, closed: nothing more will come.)
    auto batch = events.From(next, absl::Now() + absl::Milliseconds(500));
    for (const auto& event : batch.events) {
      if (!writer->Write(event)) return grpc::Status::OK;
    }
    next = batch.next_seq;
    if (batch.closed) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* request,
                                       v1::CancelJobResponse*) {
  return ToGrpcStatus(jobs_->Cancel(request->job_id(), request->reason()));
}

namespace {
grpc::Status Drain(JobManager* jobs, const v1::DrainHostRequest* request,
                   v1::DrainHostResponse* response, bool drained) {
  HVDD_ASSIGN_OR_RETURN(std::vector<std::string> ids,
                        jobs->SetDrained(request->host(), request->job_id(), drained),
                        ToGrpcStatus(_));
  for (auto& id : ids) response->add_job_ids(std::move(id));
  return grpc::Status::OK;
}
}  // namespace

grpc::Status JobServiceImpl::DrainHost(grpc::ServerContext*, const v1::DrainHostRequest* request,
                                       v1::DrainHostResponse* response) {
  return Drain(jobs_, request, response, true);
}

grpc::Status JobServiceImpl::UndrainHost(grpc::ServerContext*, const v1::DrainHostRequest* request,
                                         v1::DrainHostResponse* response) {
  return Drain(jobs_, request, response, false);
}

grpc::Status JobServiceImpl::GetWorkerOutput(grpc::ServerContext*,
                                             const v1::GetWorkerOutputRequest* request,
                                             v1::GetWorkerOutputResponse* response) {
  if (jobs_->FindArchived(request->job_id())) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("the output of ", request->job_id(),
                                     " is gone: worker output is not kept across a daemon "
                                     "restart (its events are: watch the job)"));
  }
  auto driver = jobs_->Find(request->job_id());
  if (!driver) return NoSuchJob(request->job_id());
  if (request->rank() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("rank must be >= 0, got ", request->rank()));
  }
  const int max_lines = request->max_lines() > 0 ? std::min(request->max_lines(), 10000) : 100;
  for (auto& line : driver->events().OutputOfRank(request->rank(), max_lines)) {
    *response->add_lines() = std::move(line);
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::StopDaemon(grpc::ServerContext*, const v1::StopDaemonRequest* request,
                                        v1::StopDaemonResponse* response) {
  if (!stop_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this daemon runs inside horovodrun and ends with its job: stop that "
                        "job instead (Ctrl-C, or horovodctl cancel)");
  }
  return ToGrpcStatus(stop_(*request, response));
}

}  // namespace horovodd::daemon
