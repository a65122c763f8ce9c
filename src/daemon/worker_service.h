// gRPC adapter for WorkerService: routes each call to its job's driver. Uses
// the callback API, so a rendezvous or key wait held open costs memory, not a
// thread.
#pragma once

#include "daemon/job_manager.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  explicit WorkerServiceImpl(JobManager* jobs) : jobs_(jobs) {}

  grpc::ServerUnaryReactor* Rendezvous(grpc::CallbackServerContext* context,
                                       const v1::RendezvousRequest* request,
                                       v1::RendezvousResponse* response) override;
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* Attach(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ReportCommit(grpc::CallbackServerContext* context,
                                         const v1::CommitReport* request,
                                         v1::Empty* response) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::FailureReport* request,
                                          v1::Empty* response) override;

 private:
  // The caller's job, or nullptr after finishing `reactor` with NOT_FOUND.
  std::shared_ptr<JobDriver> JobOf(const v1::WorkerIdentity& who,
                                   grpc::ServerUnaryReactor* reactor);

  JobManager* const jobs_;
};

}  // namespace horovodd::daemon
