#include "daemon/standby/standby_job_service.h"

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/standby_contract.h"

namespace horovodd::daemon {

namespace {

grpc::Status NoLeader() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "no horovodd leads at the moment (an election is under way); try again "
                      "in a few seconds");
}

}  // namespace

StandbyJobService::StandbyJobService(std::shared_ptr<grpc::ChannelCredentials> credentials,
                                     std::function<void()> stop)
    : credentials_(std::move(credentials)), stop_(std::move(stop)) {}

void StandbyJobService::SetSelf(const std::string& self) {
  absl::MutexLock lock(&mu_);
  self_ = self;
}

std::string StandbyJobService::Self() {
  absl::MutexLock lock(&mu_);
  return self_;
}

void StandbyJobService::SetLeader(const std::string& leader) {
  absl::MutexLock lock(&mu_);
  if (leader == leader_.address) return;
  leader_.address = leader;
  leader_.stub = leader.empty() ? nullptr
                                : std::shared_ptr<v1::JobService::Stub>(v1::JobService::NewStub(
                                      grpc::CreateChannel(leader, credentials_)));
}

StandbyJobService::Leader StandbyJobService::CurrentLeader() {
  absl::MutexLock lock(&mu_);
  return leader_;
}

grpc::Status StandbyJobService::Refuse(grpc::ServerContext* context) {
  const std::string leader = CurrentLeader().address;
  if (!leader.empty()) context->AddTrailingMetadata(kLeaderMetadataKey, leader);
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, StandbyRefusal(Self(), leader));
}

void StandbyJobService::Forwarding(const grpc::ServerContext& from, grpc::ClientContext& to) {
  const auto& metadata = from.client_metadata();
  for (auto it = metadata.find("authorization");
       it != metadata.end() && it->first == "authorization"; ++it) {
    to.AddMetadata("authorization", std::string(it->second.data(), it->second.size()));
  }
  to.set_deadline(from.deadline());
}

template <typename Request, typename Response>
grpc::Status StandbyJobService::Forward(grpc::ServerContext* context, const Request& request,
                                        Response* response, StubCall<Request, Response> call) {
  Leader leader = CurrentLeader();
  if (leader.stub == nullptr) return NoLeader();
  grpc::ClientContext forwarded;
  Forwarding(*context, forwarded);
  grpc::Status status = ((*leader.stub).*call)(&forwarded, request, response);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("this horovodd (", Self(),
                                     ") is a standby and cannot reach "
                                     "the leader ",
                                     leader.address, ": ", status.error_message()));
  }
  return status;
}

grpc::Status StandbyJobService::SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest*,
                                          v1::SubmitJobResponse*) {
  return Refuse(context);
}

grpc::Status StandbyJobService::CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest*,
                                          v1::CancelJobResponse*) {
  return Refuse(context);
}

grpc::Status StandbyJobService::DrainHost(grpc::ServerContext* context, const v1::DrainHostRequest*,
                                          v1::DrainHostResponse*) {
  return Refuse(context);
}

grpc::Status StandbyJobService::UndrainHost(grpc::ServerContext* context,
                                            const v1::DrainHostRequest*, v1::DrainHostResponse*) {
  return Refuse(context);
}

grpc::Status StandbyJobService::StopDaemon(grpc::ServerContext*, const v1::StopDaemonRequest*,
                                           v1::StopDaemonResponse* response) {
  if (!stop_) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "this horovodd cannot be stopped "
                        "over RPC");
  }
  response->set_running_jobs(0);  // a standby drives none
  stop_();
  return grpc::Status::OK;
}

grpc::Status StandbyJobService::GetJob(grpc::ServerContext* context,
                                       const v1::GetJobRequest* request, v1::JobStatus* response) {
  return Forward(context, *request, response, &v1::JobService::Stub::GetJob);
}

grpc::Status StandbyJobService::ListJobs(grpc::ServerContext* context,
                                         const v1::ListJobsRequest* request,
                                         v1::ListJobsResponse* response) {
  return Forward(context, *request, response, &v1::JobService::Stub::ListJobs);
}

grpc::Status StandbyJobService::GetWorkerOutput(grpc::ServerContext* context,
                                                const v1::GetWorkerOutputRequest* request,
                                                v1::GetWorkerOutputResponse* response) {
  return Forward(context, *request, response, &v1::JobService::Stub::GetWorkerOutput);
}

grpc::Status StandbyJobService::WatchJob(grpc::ServerContext* context,
                                         const v1::WatchJobRequest* request,
                                         grpc::ServerWriter<v1::JobEvent>* writer) {
  Leader leader = CurrentLeader();
  if (leader.stub == nullptr) return NoLeader();
  grpc::ClientContext forwarded;
  Forwarding(*context, forwarded);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> events =
      leader.stub->WatchJob(&forwarded, *request);
  // A caller that goes away ends the forwarded stream too, even between events.
  absl::Notification done;
  std::thread watcher([&] {
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
      if (context->IsCancelled()) {
        forwarded.TryCancel();
        return;
      }
    }
  });
  v1::JobEvent event;
  while (events->Read(&event)) {
    if (!writer->Write(event)) {
      forwarded.TryCancel();
      break;
    }
  }
  grpc::Status status = events->Finish();
  done.Notify();
  watcher.join();
  return status;
}

}  // namespace horovodd::daemon
