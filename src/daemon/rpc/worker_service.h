// gRPC adapter for WorkerService: routes each call to its job's driver. Uses
// the callback API, so a rendezvous or key wait held open costs memory, not a
// thread.
#pragma once

#include <grpcpp/server_builder.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/config/daemon_config.h"
#include "daemon/job/job_manager.h"
#include "daemon/job_events/job_observer.h"
#include "daemon/rpc/client_stream_limiter.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

// The heartbeat interval the daemon asks each job's workers for, in every
// message of their Attach streams (workers/heartbeat_interval.h says how it
// is chosen).
class HeartbeatSchedule final : public JobObserver {
 public:
  // Learns each job's interval when it is submitted, forgets it at its end.
  void OnJobSubmitted(const std::string& job_id, const v1::JobSpec& spec, absl::Time created,
                      const std::string& client_request_id) override;
  void OnJobEvent(const std::string& job_id, const v1::JobEvent& event) override;

  // The job's interval in milliseconds; 0 for a job it does not know.
  int64_t IntervalMs(const std::string& job_id) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> interval_ms_ ABSL_GUARDED_BY(mu_);  // by job id
};

// The gRPC server settings horovodd serves its workers with (the scale
// benchmark's stand-in daemon uses them too): the request size cap, and no
// BDP probing. Every message here is small, so a bigger flow-control window
// gains nothing, while each probe costs a ping and its answer, a timer and
// wake-ups per connection, thousands of connections over.
void ConfigureWorkerServer(grpc::ServerBuilder& builder, const DaemonLimits& limits);

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // Every call must carry the worker token of the job it names (`access`
  // checks it); both outlive the service.
  WorkerServiceImpl(JobManager* jobs, AccessPolicy* access) : jobs_(jobs), access_(access) {}
  // Requests are validated against `limits` (request_validation.h) and Attach
  // streams counted per client; set before serving (defaults until then).
  void set_limits(const DaemonLimits& limits);
  // Where Attach streams find the heartbeat interval to announce; unset (or a
  // job it does not know): none is announced and workers keep their own.
  // Set before serving; outlives the service.
  void set_heartbeat_schedule(const HeartbeatSchedule* schedule) { heartbeats_ = schedule; }

  // Gauges of the streams open now, in the Prometheus text format:
  // horovodd_attach_streams (workers' own Attach streams) and
  // horovodd_host_streams (AttachHost streams, one per relaying host).
  std::string RenderMetrics() const;
  int64_t open_attach_streams() const { return attach_open_->load(); }
  int64_t open_host_streams() const { return host_open_->load(); }

  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;
  grpc::ServerBidiReactor<v1::WorkerMessage, v1::DaemonMessage>* Attach(
      grpc::CallbackServerContext* context) override;
  // Several workers of one host on one stream (host_stream.h); counted
  // against the same per-client limit as Attach streams.
  grpc::ServerBidiReactor<v1::HostMessage, v1::HostDaemonMessage>* AttachHost(
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
  const HeartbeatSchedule* heartbeats_ = nullptr;
  std::unique_ptr<ClientStreamLimiter> attach_streams_ = MakeAttachLimiter(limits_);
  // Shared with the streams' slots, which may outlive the service.
  std::shared_ptr<std::atomic<int64_t>> attach_open_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> host_open_ = std::make_shared<std::atomic<int64_t>>(0);
  static std::unique_ptr<ClientStreamLimiter> MakeAttachLimiter(const DaemonLimits& limits);
};

}  // namespace horovodd::daemon
