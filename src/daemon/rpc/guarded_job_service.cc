#include "daemon/rpc/guarded_job_service.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/method_handler.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "daemon/rpc/grpc_status.h"
#include "daemon/rpc/job_limits.h"
#include "daemon/validation/request_validation.h"

namespace horovodd::daemon {

// Builds each row's gRPC handler from the method's signature. The handler
// types are the ones protoc's generated services instantiate: gRPC's
// synchronous API has no public way to wrap another service's methods, and
// these keep the one table the only place that lists them.
struct JobServiceHandlers {
  using Service = v1::JobService::Service;
  template <typename Request, typename Response>
  using UnaryMethod = grpc::Status (Service::*)(grpc::ServerContext*, const Request*, Response*);
  template <typename Request, typename Response>
  using StreamMethod = grpc::Status (Service::*)(grpc::ServerContext*, const Request*,
                                                 grpc::ServerWriter<Response>*);

  // One request, one response.
  template <auto kMethod, typename Request, typename Response>
  static grpc::internal::MethodHandler* Unary(GuardedJobService* service,
                                              const JobServiceMethod& row) {
    return new grpc::internal::RpcMethodHandler<GuardedJobService, Request, Response>(
        [&row](GuardedJobService* guard, grpc::ServerContext* context, const Request* request,
               Response* response) {
          return guard->Run(row, *context, *request, [&](const Request& admitted) {
            return (guard->inner_->*kMethod)(context, &admitted, response);
          });
        },
        service);
  }

  // One request, a stream of responses.
  template <auto kMethod, typename Request, typename Response>
  static grpc::internal::MethodHandler* ServerStream(GuardedJobService* service,
                                                     const JobServiceMethod& row) {
    return new grpc::internal::ServerStreamingHandler<GuardedJobService, Request, Response>(
        [&row](GuardedJobService* guard, grpc::ServerContext* context, const Request* request,
               grpc::ServerWriter<Response>* writer) {
          return guard->Run(row, *context, *request, [&](const Request& admitted) {
            return (guard->inner_->*kMethod)(context, &admitted, writer);
          });
        },
        service);
  }

  // The row of `kMethod`; its shape picks the handler (a ServerWriter
  // parameter is the more specialized match, so streams land on the second).
  template <auto kMethod, typename Request, typename Response>
  static constexpr JobServiceMethod RowOf(UnaryMethod<Request, Response>, const char* name,
                                          Access access, JobServiceLimit limit) {
    return {name,
            access,
            limit,
            /*server_stream=*/false,
            &Request::descriptor,
            &Response::descriptor,
            &Unary<kMethod, Request, Response>};
  }
  template <auto kMethod, typename Request, typename Response>
  static constexpr JobServiceMethod RowOf(StreamMethod<Request, Response>, const char* name,
                                          Access access, JobServiceLimit limit) {
    return {name,
            access,
            limit,
            /*server_stream=*/true,
            &Request::descriptor,
            &Response::descriptor,
            &ServerStream<kMethod, Request, Response>};
  }
};

namespace {

// One row of the table: `kMethod` is the method JobServiceImpl implements.
template <auto kMethod>
constexpr JobServiceMethod Row(const char* name, Access access,
                               JobServiceLimit limit = JobServiceLimit::kNone) {
  return JobServiceHandlers::RowOf<kMethod>(kMethod, name, access, limit);
}

using Service = v1::JobService::Service;

// Access: submit, cancel, drain, undrain and stopping the daemon change what
// runs and need the admin token; the rest read, and the viewer token (or open_read_only) opens
// them.
constexpr JobServiceMethod kJobServiceMethods[] = {
    Row<&Service::SubmitJob>("SubmitJob", Access::kAdmin, JobServiceLimit::kUnfinishedJobs),
    Row<&Service::GetJob>("GetJob", Access::kRead),
    Row<&Service::ListJobs>("ListJobs", Access::kRead),
    Row<&Service::WatchJob>("WatchJob", Access::kRead, JobServiceLimit::kWatchStreamsPerClient),
    Row<&Service::CancelJob>("CancelJob", Access::kAdmin),
    Row<&Service::DrainHost>("DrainHost", Access::kAdmin),
    Row<&Service::UndrainHost>("UndrainHost", Access::kAdmin),
    Row<&Service::GetWorkerOutput>("GetWorkerOutput", Access::kRead),
    Row<&Service::StopDaemon>("StopDaemon", Access::kAdmin),
};

const google::protobuf::ServiceDescriptor& JobServiceDescriptor() {
  const google::protobuf::ServiceDescriptor* service =
      v1::SubmitJobRequest::descriptor()->file()->FindServiceByName("JobService");
  HVDD_CHECK(service != nullptr);
  return *service;
}

}  // namespace

absl::Span<const JobServiceMethod> JobServiceMethods() { return kJobServiceMethods; }

GuardedJobService::GuardedJobService(v1::JobService::Service* inner, const JobManager* jobs,
                                     AccessPolicy* policy, DaemonLimits limits)
    : inner_(inner),
      jobs_(jobs),
      policy_(policy),
      limits_(limits),
      watch_streams_("WatchJob", "limits.max_watch_streams_per_client",
                     limits.max_watch_streams_per_client) {
  const google::protobuf::ServiceDescriptor& service = JobServiceDescriptor();
  for (const JobServiceMethod& row : JobServiceMethods()) {
    const google::protobuf::MethodDescriptor* method = service.FindMethodByName(row.name);
    HVDD_CHECK(method != nullptr) << "no RPC " << row.name << " in " << service.full_name();
    HVDD_CHECK(!method->client_streaming()) << row.name;
    HVDD_CHECK_EQ(method->server_streaming(), row.server_stream) << row.name;
    HVDD_CHECK(method->input_type() == row.request_type())
        << row.name << " takes " << method->input_type()->full_name();
    HVDD_CHECK(method->output_type() == row.response_type())
        << row.name << " answers " << method->output_type()->full_name();
    HVDD_CHECK(row.limit != JobServiceLimit::kUnfinishedJobs ||
               method->input_type() == v1::SubmitJobRequest::descriptor())
        << row.name << ": limits.max_jobs counts job submissions";
    std::string path = absl::StrCat("/", service.full_name(), "/", row.name);
    HVDD_CHECK(std::find(paths_.begin(), paths_.end(), path) == paths_.end())
        << "two rows for " << row.name;
    paths_.push_back(std::move(path));
    AddMethod(new grpc::internal::RpcServiceMethod(paths_.back().c_str(),
                                                   row.server_stream
                                                       ? grpc::internal::RpcMethod::SERVER_STREAMING
                                                       : grpc::internal::RpcMethod::NORMAL_RPC,
                                                   row.make_handler(this, row)));
  }
  // Rows name distinct RPCs of the proto, so equal counts mean every RPC has
  // its row: one without would answer UNIMPLEMENTED to every client.
  HVDD_CHECK_EQ(paths_.size(), static_cast<size_t>(service.method_count()))
      << "JobService RPCs without a row in JobServiceMethods()";
}

template <typename Request, typename Call>
grpc::Status GuardedJobService::Run(const JobServiceMethod& row, grpc::ServerContext& context,
                                    const Request& request, Call call) {
  HVDD_RETURN_IF_ERROR_WITH(policy_->Authorize(context, row.name, row.access), ToGrpcStatus(_));
  // Malformed or oversized requests are refused before anything is counted.
  HVDD_RETURN_IF_ERROR_WITH(ValidateRequest(request, limits_), ToGrpcStatus(_));
  switch (row.limit) {
    case JobServiceLimit::kNone:
      return call(request);
    case JobServiceLimit::kUnfinishedJobs:
      return AdmitJob(request, call);
    case JobServiceLimit::kWatchStreamsPerClient: {
      // Held until the stream ends.
      HVDD_ASSIGN_OR_RETURN(ClientStreamLimiter::Slot slot, watch_streams_.Acquire(context.peer()),
                            ToGrpcStatus(_));
      return call(request);
    }
  }
  HVDD_CHECK(false) << "row " << row.name << " has no limit case";
  return grpc::Status(grpc::StatusCode::INTERNAL, "unreachable");
}

template <typename Call>
grpc::Status GuardedJobService::AdmitJob(const v1::SubmitJobRequest& request, Call call) {
  absl::MutexLock lock(&submit_mu_);
  v1::SubmitJobRequest limited = request;
  // A repeated submission (its client request id names a job) makes no job,
  // so limits.max_jobs does not refuse it; its spec is capped as the first
  // one's was, for JobManager::Submit to compare them.
  const bool repeated = !jobs_->JobOfRequest(request.client_request_id()).empty();
  HVDD_RETURN_IF_ERROR_WITH(
      ApplyJobLimits(limits_, repeated ? 0 : UnfinishedJobs(), *limited.mutable_spec()),
      ToGrpcStatus(_));
  return call(limited);
}

template <typename Request, typename Call>
grpc::Status GuardedJobService::AdmitJob(const Request&, Call) {
  HVDD_CHECK(false) << "limits.max_jobs on a method that submits no job";
  return grpc::Status(grpc::StatusCode::INTERNAL, "unreachable");
}

int GuardedJobService::UnfinishedJobs() const {
  int unfinished = 0;
  for (const auto& job : jobs_->List()) unfinished += job->Ended() ? 0 : 1;
  return unfinished;
}

}  // namespace horovodd::daemon
