// gRPC adapter for WorkerService: routes each call to its job's driver. Uses
// the callback API, so a rendezvous or key wait held open costs memory, not a
// thread.
#pragma once

#include <memory>

#include "daemon/auth_policy.h"
#include "daemon/client_stream_limiter.h"
#include "daemon/daemon_config.h"
#include "daemon/job_manager.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // Every call must carry the worker token of the job it names (`access`
  // checks it); both outlive the service.
  WorkerServiceImpl(JobManager* jobs, AccessPolicy* access) : jobs_(jobs), access_(access) {}
  // Requests are validated against `limits` (request_validation.h) and Attach
  // streams counted per client; set before serving (defaults until then).
  void set_limits(const DaemonLimits& limits);

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
  // The caller's job, or nullptr after finishing `reactor` with NOT_FOUND
  // (no such job) or the refusal of a token that is not the job's.
  std::shared_ptr<JobDriver> JobOf(grpc::CallbackServerContext* context, const char* method,
                                   const v1::WorkerIdentity& who,
                                   grpc::ServerUnaryReactor* reactor);

  // True when `request` passes ValidateRequest; otherwise finishes `reactor`
  // with the refusal.
  template <typename Request>
  bool Accepted(const Request& request, grpc::ServerUnaryReactor* reactor) const;

  JobManager* const jobs_;
  AccessPolicy* const access_;
  DaemonLimits limits_;
  std::unique_ptr<ClientStreamLimiter> attach_streams_ = MakeAttachLimiter(limits_);
  static std::unique_ptr<ClientStreamLimiter> MakeAttachLimiter(const DaemonLimits& limits);
};

}  // namespace horovodd::daemon
