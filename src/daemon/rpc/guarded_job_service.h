// The JobService that clients reach: every call passes the same checks, in
// this order, before JobServiceImpl (job_service.h) does the work:
//
//   1. the caller's token opens the method (AccessPolicy::Authorize), so an
//      unauthenticated client never reaches validation or the limits;
//   2. the request is well formed and within the limits (ValidateRequest,
//      request_validation.h; its overload follows the request type);
//   3. the method's own limit, if its row names one: limits.max_jobs for
//      SubmitJob, limits.max_watch_streams_per_client for WatchJob.
//
// What each RPC needs is one row of one table (JobServiceMethods(), defined
// in guarded_job_service.cc): a new RPC is a row there plus its method on
// JobServiceImpl. The table test (test_job_service_table.cc) holds the table
// to the proto's service descriptor.
#pragma once

#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/auth/auth_policy.h"
#include "daemon/config/daemon_config.h"
#include "daemon/job/job_manager.h"
#include "daemon/rpc/client_stream_limiter.h"
#include "horovodd.grpc.pb.h"

namespace horovodd::daemon {

class GuardedJobService;

// What a method is held to after its token and its request's validation.
enum class JobServiceLimit {
  kNone,
  // limits.max_jobs unfinished jobs at once; caps an elastic job's max_np at
  // limits.max_workers_per_job (ApplyJobLimits). SubmitJob only.
  kUnfinishedJobs,
  // limits.max_watch_streams_per_client open at once (each holds a thread).
  kWatchStreamsPerClient,
};

// One RPC of v1::JobService.
struct JobServiceMethod {
  const char* name;       // as in horovodd.proto and AccessPolicy's logs: "SubmitJob"
  Access access;          // the token it needs
  JobServiceLimit limit;  // checked after the request's validation
  bool server_stream;     // answers with a stream (from the method's signature)
  // The method's request and response messages (from its signature too), to
  // hold `name` to the proto's RPC of that name.
  const google::protobuf::Descriptor* (*request_type)();
  const google::protobuf::Descriptor* (*response_type)();

  // Makes the gRPC handler that runs the checks, then the method; the row's
  // request and response types live in it. For GuardedJobService alone.
  grpc::internal::MethodHandler* (*make_handler)(GuardedJobService* service,
                                                 const JobServiceMethod& row);
};

// The table: one row per RPC of v1::JobService, in the proto's order.
absl::Span<const JobServiceMethod> JobServiceMethods();

// Registers as "horovodd.v1.JobService" with every method of the table.
class GuardedJobService final : public grpc::Service {
 public:
  // `inner`, `jobs` and `policy` outlive this service. Checks (HVDD_CHECK)
  // that the table matches the proto: one row per RPC, each with the RPC's
  // request and response types and streaming. (DrainHost and UndrainHost
  // share their types: their rows are told apart by the tests alone.)
  GuardedJobService(v1::JobService::Service* inner, const JobManager* jobs, AccessPolicy* policy,
                    DaemonLimits limits);

 private:
  friend struct JobServiceHandlers;  // the table's handlers call Run and inner_

  // Runs `row`'s checks on `request`, then `call(request)` with the request
  // the limits let through (SubmitJob's spec may get a max_np).
  template <typename Request, typename Call>
  grpc::Status Run(const JobServiceMethod& row, grpc::ServerContext& context,
                   const Request& request, Call call);

  // Admits one more job under limits.max_jobs, then submits it.
  template <typename Call>
  grpc::Status AdmitJob(const v1::SubmitJobRequest& request, Call call);
  template <typename Request, typename Call>
  grpc::Status AdmitJob(const Request&, Call);  // never: a row misplaced kUnfinishedJobs

  int UnfinishedJobs() const;

  v1::JobService::Service* const inner_;
  const JobManager* const jobs_;
  AccessPolicy* const policy_;
  const DaemonLimits limits_;
  ClientStreamLimiter watch_streams_;
  // Held across the count of unfinished jobs and the submit, so concurrent
  // submissions cannot together go past limits.max_jobs. Guards no field.
  absl::Mutex submit_mu_;
  // "/horovodd.v1.JobService/SubmitJob", ...: gRPC keeps pointers to them.
  std::deque<std::string> paths_;
};

}  // namespace horovodd::daemon
