// JobService as a standby horovodd serves it (issue 36): the reads (GetJob,
// ListJobs, WatchJob, GetWorkerOutput) forwarded to the leader, with the
// caller's token, so `horovodctl list/status/watch/logs` work against any
// daemon of an HA setup; the writes refused as common/standby_contract.h
// says, naming the leader. While no daemon leads, reads are UNAVAILABLE
// (an election is under way). StopDaemon stops this standby.
//
// Threading: gRPC's sync server calls these from its threads; the leader's
// address and channel are guarded by a mutex.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class StandbyJobService final : public v1::JobService::Service {
 public:
  // `credentials`: how to dial the leader. `stop`: what StopDaemon does
  // (null: refused).
  StandbyJobService(std::shared_ptr<grpc::ChannelCredentials> credentials,
                    std::function<void()> stop);

  // This daemon's advertised address, for the messages (known once it listens).
  void SetSelf(const std::string& self) ABSL_LOCKS_EXCLUDED(mu_);
  // The leader's address as last read from etcd; "" while none leads.
  void SetLeader(const std::string& leader) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::SubmitJobResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::CancelJobResponse* response) override;
  grpc::Status DrainHost(grpc::ServerContext* context, const v1::DrainHostRequest* request,
                         v1::DrainHostResponse* response) override;
  grpc::Status UndrainHost(grpc::ServerContext* context, const v1::DrainHostRequest* request,
                           v1::DrainHostResponse* response) override;
  grpc::Status StopDaemon(grpc::ServerContext* context, const v1::StopDaemonRequest* request,
                          v1::StopDaemonResponse* response) override;

  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::JobStatus* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status GetWorkerOutput(grpc::ServerContext* context,
                               const v1::GetWorkerOutputRequest* request,
                               v1::GetWorkerOutputResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;

 private:
  struct Leader {
    std::string address;                         // "" while none leads
    std::shared_ptr<v1::JobService::Stub> stub;  // null while none leads
  };
  Leader CurrentLeader() ABSL_LOCKS_EXCLUDED(mu_);
  std::string Self() ABSL_LOCKS_EXCLUDED(mu_);
  // FAILED_PRECONDITION naming the leader, with its address in the trailing metadata.
  grpc::Status Refuse(grpc::ServerContext* context);
  // A client context for the forwarded call: the caller's token and deadline.
  static void Forwarding(const grpc::ServerContext& from, grpc::ClientContext& to);
  // A unary read of the leader's stub (&v1::JobService::Stub::GetJob, ...).
  template <typename Request, typename Response>
  using StubCall = grpc::Status (v1::JobService::Stub::*)(grpc::ClientContext*, const Request&,
                                                          Response*);
  // Forwards a unary read to the leader (UNAVAILABLE while none leads, or
  // naming it when it cannot be reached).
  template <typename Request, typename Response>
  grpc::Status Forward(grpc::ServerContext* context, const Request& request, Response* response,
                       StubCall<Request, Response> call);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const std::function<void()> stop_;
  absl::Mutex mu_;
  std::string self_ ABSL_GUARDED_BY(mu_);
  Leader leader_ ABSL_GUARDED_BY(mu_);
};

}  // namespace horovodd::daemon
